package sidecarchecks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/cluster"
)

// What the failure-policy checks share: a Pod behind a Service, and the
// client fixture in a Pod of its own asking it every clientEvery for
// clientFor - long enough for the crash it waits for and the restart.
const (
	clientEvery = 50 * time.Millisecond
	clientFor   = 12 * time.Second
)

// servedPod makes pod and a Service in front of it, waits for the Pod
// Ready, and returns it and the Service's cluster IP.
func (s *Sidecars) servedPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, string, error) {
	if err := s.service(ctx, pod.Namespace, pod.Name, pod.Labels); err != nil {
		return nil, "", err
	}
	if _, err := s.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, "", err
	}
	p, err := s.waitPod(ctx, "certify/sidecar-pod", pod.Namespace, pod.Name, "Ready", podReady)
	if err != nil {
		return nil, "", err
	}
	svc, err := s.cs.CoreV1().Services(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	return p, svc.Spec.ClusterIP, nil
}

// withClient is what Pod ns/pod's fixtures and the client Pod beside it
// recorded on node.
func withClient(ctx context.Context, node cluster.Node, ns, pod string) ([]fixtures.Event, error) {
	ev, err := events(ctx, node, ns, pod)
	if err != nil {
		return nil, err
	}
	cev, err := events(ctx, node, ns, "client")
	return append(ev, cev...), err
}

// runClient runs the client fixture in a Pod of its own on node, asking
// urls, and waits for it to end.
func (s *Sidecars) runClient(ctx context.Context, ns, node string, urls ...string) error {
	b := podBuilder{image: s.image, ns: ns, name: "client", node: node}
	if err := s.startClient(ctx, b, nil, []string{"-every", clientEvery.String(), "-for", clientFor.String()}, urls); err != nil {
		return err
	}
	return s.clientEnded(ctx, ns, b.name)
}

// startClient starts the client fixture, with flags, asking urls, in Pod
// b (labelled with labels besides its own).
func (s *Sidecars) startClient(ctx context.Context, b podBuilder, labels map[string]string, flags, urls []string) error {
	for _, u := range urls {
		flags = append(flags, "-url", u)
	}
	pod := b.pod(nil, []corev1.Container{b.container("client", "client", flags...)})
	for k, v := range labels {
		pod.Labels[k] = v
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	_, err := s.cs.CoreV1().Pods(b.ns).Create(ctx, pod, metav1.CreateOptions{})
	return err
}

// clientEnded waits for client Pod ns/name to end, and says how it ended
// if not with success.
func (s *Sidecars) clientEnded(ctx context.Context, ns, name string) error {
	p, err := s.waitPod(ctx, "certify/sidecar-pod", ns, name, "ended", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if err == nil && p.Status.Phase != corev1.PodSucceeded {
		err = fmt.Errorf("the client Pod %s ended %s: %s", name, p.Status.Phase, containerStates(p))
	}
	return err
}

// clientEvents waits for client Pod ns/name on k to end and returns what
// it recorded.
func (s *Sidecars) clientEvents(ctx context.Context, k Kubelet, ns, name string) ([]fixtures.Event, error) {
	if err := s.clientEnded(ctx, ns, name); err != nil {
		return nil, err
	}
	return events(ctx, k.Node, ns, name)
}

// attempt is one request the client recorded.
type attempt struct {
	url   string
	ok    bool
	began time.Time
}

// attempts are the client's records among ev.
func attempts(ev []fixtures.Event) []attempt {
	var out []attempt
	for _, e := range ev {
		f := strings.Fields(e.What)
		if e.Who != "client" || len(f) < 3 || (f[0] != "ok" && f[0] != "fail") || !strings.HasPrefix(f[2], "began=") {
			continue
		}
		ns, err := strconv.ParseInt(strings.TrimPrefix(f[2], "began="), 10, 64)
		if err != nil {
			continue
		}
		out = append(out, attempt{url: f[1], ok: f[0] == "ok", began: time.Unix(0, ns)})
	}
	return out
}
