package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skewer-k8s/skewer/harness/wait"
)

// APIServerPIDs finds the kube-apiserver processes in n; pgrep's error
// when there is none.
func APIServerPIDs(ctx context.Context, n Node) ([]string, error) {
	out, err := n.Run(ctx, "pgrep", "-x", "kube-apiserver")
	return strings.Fields(out), err
}

// KillOnceStopping ends the graceful stop of n's apiserver processes pids
// (told to stop by SIGTERM, from the kubelet or anyone): once the
// apiserver has begun its stop (stopping) and WatchesCut has let the requests it had begun
// finish, pids are killed. Left alone, a stopping kube-apiserver holds its
// open watches (--shutdown-watch-termination-grace-period is 0: it does
// not wait for them to end, and their final audit events are lost either
// way) until the kubelet kills it at the end of the Pod's grace period,
// 30 s, serving nothing meanwhile: every static Pod restart of an
// apiserver would wait that out. One that is not ready but not stopping
// either (/readyz/shutdown ok) is waited for.
func (c *Cluster) KillOnceStopping(ctx context.Context, n Node, pids []string) error {
	cs, err := c.APIServerClient(ctx, n)
	if err != nil {
		return err
	}
	if err := wait.For(ctx, "cluster/apiserver-stopping", n.Name+"'s apiserver stopping", func(ctx context.Context) (bool, string, error) {
		err := health(ctx, cs, "/readyz/shutdown")
		return stopping(err), fmt.Sprintf("its /readyz/shutdown: %v", orOK(err)), nil
	}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(WatchesCut):
	}
	_, _ = n.Run(ctx, append([]string{"kill", "-KILL"}, pids...)...) // gone already, if nothing held them
	return nil
}

// stopping says whether err, from an apiserver's /readyz/shutdown, means
// it has begun to stop: the check fails (500), or the server is no longer
// listening (kubeadm sets no --shutdown-delay-duration: it stops at once)
// - refused directly, or accepted by Docker's proxy of the published port
// and closed. Anything else - a timeout, a 403 while its authorizer
// syncs, a certificate this client does not trust - says nothing either
// way.
func stopping(err error) bool {
	return apierrors.IsInternalError(err) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func orOK(err error) any {
	if err == nil {
		return "ok"
	}
	return err
}

// WatchesCut is how long a stopping apiserver is given, once it refuses
// new requests, for the requests it had begun: the traffic's take well
// under a second (p99 0.4-0.6 s through the load balancer on a busy
// 2-core machine, session 19), the components' no longer; only watches
// stay open past that.
const WatchesCut = 2 * time.Second

// RestartKubeletOnceExited restarts n's kubelet once the processes pids
// have exited: a static Pod's, which the kubelet is stopping because the
// Pod's manifest changed. The kubelet starts the changed Pod only once the
// one it replaces has terminated, and looks again only after its back-off
// (k8s.io/kubernetes pkg/kubelet/pod_workers.go allowPodStart:
// backOffPeriod, 10 s, jittered up to 15 s; v1.35 and v1.36): 8-14 s with
// nothing running for every static Pod replaced (session 32's vendor run:
// a controller manager stopped at 17:21:59.5, its successor's sandbox made
// at 17:22:09.2). A restarted kubelet holds no predecessor and starts the
// Pod at once; it keeps every container it finds running. The wait runs in
// the node, one exec, bounded by the Pod's grace period (30 s) and a
// margin; the kubelet is restarted either way.
func RestartKubeletOnceExited(ctx context.Context, n Node, pids []string) error {
	const script = `timeout 45 sh -c 'for p; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done' sh "$@"
systemctl restart kubelet`
	if _, err := n.Run(ctx, append([]string{"sh", "-c", script, "sh"}, pids...)...); err != nil {
		return fmt.Errorf("restarting %s's kubelet once its replaced static Pod exited: %w", n.Name, err)
	}
	return nil
}
