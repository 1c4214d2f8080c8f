package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
)

// inPlaceInput says where an in-place rollout goes.
type inPlaceInput struct {
	// To is the version every control plane ends at.
	To version.Version
	// PauseAfter stops after this many control planes (0: all).
	PauseAfter int
	// Artifacts are To's binaries and image tars (nodeimage.Builder.Artifacts).
	Artifacts *nodeimage.Artifacts
	// Staged says To's images are in every node already (StageImages).
	Staged bool
}

// Validate refuses input that cannot describe an in-place rollout.
func (in inPlaceInput) Validate() error {
	if err := checkMove("an in-place rollout", in.To, in.PauseAfter); err != nil {
		return err
	}
	if in.Artifacts == nil {
		return errors.New("an in-place rollout needs the target's artifacts")
	}
	return nil
}

// inPlace plans the kinder way: the target's images loaded into every node,
// `kubeadm upgrade apply` on the first control plane and `kubeadm upgrade
// node` on the others, each node's kubelet replaced and restarted. kubeadm
// does not downgrade: a rollback is a surge back.
func inPlace(ctx context.Context, c *cluster.Cluster, in inPlaceInput) ([]Action, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	target := in.To
	old, _, err := toMove(ctx, c, target, false)
	if err != nil {
		return nil, err
	}
	sort.Strings(old) // the bootstrap node first: upgrade apply runs there
	clusterVersion, err := ClusterVersion(ctx, c)
	if err != nil {
		return nil, err
	}
	if in.PauseAfter > 0 && in.PauseAfter < len(old) {
		old = old[:in.PauseAfter]
	}
	var actions []Action
	if !in.Staged {
		actions = append(actions, Do("load the "+target.String()+" images into the nodes that run them", func(ctx context.Context, c *cluster.Cluster) error {
			return loadImages(ctx, c, in.Artifacts)
		}))
	}
	for _, name := range old {
		// kubeadm's preflight refuses a cgroup v1 host outright; kind skips it too.
		upgrade := []string{"kubeadm", "upgrade", "node", "--ignore-preflight-errors=all", "--v=2"}
		what := "kubeadm upgrade node"
		if !clusterVersion.Equal(target) {
			upgrade = []string{"kubeadm", "upgrade", "apply", target.String(), "--yes", "--ignore-preflight-errors=all", "--v=2"}
			if target.PreRelease() != "" {
				// A vendor's suffix (v1.36.3-acme.2) is a pre-release to
				// kubeadm, which upgrades to one only when told to.
				upgrade = append(upgrade, "--allow-experimental-upgrades")
			}
			what = "kubeadm upgrade apply " + target.String()
			clusterVersion = target
			actions = append(actions, Do("set the proxy's gate in ClusterConfiguration for "+target.String(), func(ctx context.Context, c *cluster.Cluster) error {
				return setClusterProxyGate(ctx, c, target)
			}))
		}
		actions = append(actions,
			DoOn(on(name), fmt.Sprintf("take %s out of the load balancer", name), func(ctx context.Context, c *cluster.Cluster) error {
				return syncLoadBalancer(ctx, c, name)
			}),
			DoOn(on(name), fmt.Sprintf("copy %s kubeadm and kubectl into %s", target, name), func(ctx context.Context, c *cluster.Cluster) error {
				return installBinaries(ctx, c, name, in.Artifacts.BinDir, "kubeadm", "kubectl")
			}),
			DoOn(on(name), what+" on "+name+", its apiserver stopped when its etcd member is replaced", func(ctx context.Context, c *cluster.Cluster) error {
				n, err := c.Node(ctx, name)
				if err != nil {
					return err
				}
				return upgradeWatched(ctx, c, n, upgrade)
			}),
			DoOn(on(name), fmt.Sprintf("replace %s's kubelet with %s and restart it", name, target), func(ctx context.Context, c *cluster.Cluster) error {
				if err := installBinaries(ctx, c, name, in.Artifacts.BinDir, "kubelet"); err != nil {
					return err
				}
				n, err := c.Node(ctx, name)
				if err != nil {
					return err
				}
				if err := n.WriteFile(ctx, "/kind/version", []byte(target.String()+"\n"), 0o644); err != nil {
					return err
				}
				_, err = n.Run(ctx, "systemctl", "restart", "kubelet")
				return err
			}),
			DoOn(on(name), fmt.Sprintf("wait for %s Ready, its apiserver at %s and its static Pods as its new kubelet runs them", name, target), func(ctx context.Context, c *cluster.Cluster) error {
				n, err := c.Node(ctx, name)
				if err != nil {
					return err
				}
				if err := waitControlPlane(ctx, c, n, target); err != nil {
					return err
				}
				return staticPodsSettled(ctx, c, n)
			}),
			DoOn(on(name), fmt.Sprintf("put %s back into the load balancer", name), func(ctx context.Context, c *cluster.Cluster) error {
				return syncLoadBalancer(ctx, c)
			}),
		)
	}
	return actions, nil
}

// upgradeWatched runs kubeadm's upgrade command argv on node and, while
// it runs, stops the node's apiserver at the two moments kubeadm leaves
// it serving nothing useful:
//
//   - When kubeadm replaces the node's etcd member. The apiserver reads
//     that member only: left serving, every client on it stalls until the
//     member is back (kubernetes/kubeadm#2991, closed with the advice to
//     stop the apiserver first), and the kubelet - which reads only this
//     apiserver - is one of them: it deletes the member's mirror Pod
//     before it starts the new member, and that request hangs until the
//     apiserver's timeout (34 s in session 19's vendor run), after which
//     the apiserver reconnects on gRPC's back-off (26 s more). So the
//     apiserver is stopped - gracefully first, which sends its kept-alive
//     clients through the load balancer to the others - and, once it and
//     the old member have exited, the kubelet is restarted
//     (cluster.RestartKubeletOnceExited): left running, it started the
//     apiserver again at once, before the new member, and its mirror Pod
//     requests hung on that starting apiserver (10 s, TLS handshake), on
//     top of its back-off before the new member (10-15 s); the apiserver
//     then gave up on its storage and waited out a crash back-off (session
//     32's vendor run: 47 s for the member). A kubelet that has just
//     started knows no mirror Pod and makes none until its apiserver has
//     served it the Node: it starts the member and the apiserver at once.
//     Once the apiserver serves, the kubelet is restarted again
//     (restartKubeletOnceServing).
//   - When kubeadm replaces the apiserver itself: the kubelet stops the
//     old one, which is killed once it has begun to stop
//     (cluster.KillOnceStopping) instead of holding its watches for the
//     Pod's grace period, and the kubelet is restarted to start the new
//     one without its back-off (cluster.RestartKubeletOnceExited). Once
//     the new one serves, the kubelet is restarted again
//     (restartKubeletOnceServing).
//
// The controller manager and the scheduler, replaced after it, are
// started the same way once their old process has exited.
func upgradeWatched(ctx context.Context, c *cluster.Cluster, node cluster.Node, argv []string) error {
	sums := map[string]string{}
	for _, m := range []string{etcdManifest, apiserverManifest, controllerManagerManifest, schedulerManifest} {
		sum, err := manifestSum(ctx, node, m)
		if err != nil {
			return err
		}
		sums[m] = sum
	}
	watching, stop := context.WithCancel(ctx)
	defer stop()
	var g errgroup.Group
	g.Go(func() error {
		member, ok := manifestReplaced(watching, node, etcdManifest, sums[etcdManifest], "etcd")
		if !ok {
			return nil
		}
		stopped, err := stopAPIServer(watching, c, node)
		if err != nil {
			return err
		}
		if err := cluster.RestartKubeletOnceExited(watching, node, append(member, stopped...)); err != nil {
			return err
		}
		return restartKubeletOnceServing(watching, c, node)
	})
	g.Go(func() error {
		pids, ok := manifestReplaced(watching, node, apiserverManifest, sums[apiserverManifest], "kube-apiserver")
		if !ok {
			return nil
		}
		if len(pids) > 0 {
			if err := c.KillOnceStopping(watching, node, pids); err != nil {
				return err
			}
			if err := cluster.RestartKubeletOnceExited(watching, node, pids); err != nil {
				return err
			}
		}
		return restartKubeletOnceServing(watching, c, node)
	})
	for m, process := range map[string]string{controllerManagerManifest: "kube-controller-manager", schedulerManifest: "kube-scheduler"} {
		g.Go(func() error {
			pids, ok := manifestReplaced(watching, node, m, sums[m], process)
			if !ok || len(pids) == 0 {
				return nil
			}
			return cluster.RestartKubeletOnceExited(watching, node, pids)
		})
	}
	_, err := runKept(ctx, node, "/var/log/skewer-kubeadm-upgrade.log", argv...)
	stop()
	if werr := g.Wait(); werr != nil && err == nil && ctx.Err() == nil && !errors.Is(werr, context.Canceled) {
		err = fmt.Errorf("watching %s's static Pods during the upgrade: %w", node.Name, werr)
	}
	return err
}

// runKept runs argv in node with its output also kept in the node's file
// kept (under /var/log, which the evidence exports): kubeadm's own log, its
// klog lines timed, says where a step's time went.
func runKept(ctx context.Context, node cluster.Node, kept string, argv ...string) (string, error) {
	return node.Run(ctx, append([]string{"sh", "-c", `f=$1; shift; "$@" >"$f" 2>&1; rc=$?; cat "$f"; exit $rc`, "sh", kept}, argv...)...)
}

// restartKubeletOnceServing restarts node's kubelet once node's apiserver
// serves again. kubeadm waits for each replaced component's mirror Pod to
// be Running, which the kubelet reports only once its Pod informer - on
// this apiserver, which it has just seen go away and answer 403 while its
// authorizer synced - has seen the new mirror Pod; the informer's back-off
// (up to 30 s, jittered to twice that) left the apiserver's reported 50-64
// s after it served, and etcd's ~70 s after kubeadm moved its manifest
// (session 20's vendor runs, each node). A restarted kubelet lists at
// once, and keeps every container it finds running.
func restartKubeletOnceServing(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	cs, err := c.APIServerClient(ctx, node)
	if err != nil {
		return err
	}
	if err := cluster.WaitHealthy(ctx, "rollout/apiserver-replaced", node.Name+"'s apiserver serving again", cs, cluster.Readyz); err != nil {
		return err
	}
	_, err = node.Run(ctx, "systemctl", "restart", "kubelet")
	return err
}

const (
	etcdManifest              = "/etc/kubernetes/manifests/etcd.yaml"
	apiserverManifest         = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	controllerManagerManifest = "/etc/kubernetes/manifests/kube-controller-manager.yaml"
	schedulerManifest         = "/etc/kubernetes/manifests/kube-scheduler.yaml"
)

func manifestSum(ctx context.Context, node cluster.Node, file string) (string, error) {
	out, err := node.Run(ctx, "sha256sum", file)
	if err != nil {
		return "", fmt.Errorf("reading %s on %s: %w", file, node.Name, err)
	}
	sum, _, _ := strings.Cut(strings.TrimSpace(out), " ")
	return sum, nil
}

// manifestReplaced waits in the node until file's sum is no longer sum,
// and says whether it changed before ctx ended and which processes named
// process ran just before it did (those the change replaces when file is
// process's static Pod). The loop runs in the node (a poll from here would
// be a docker exec every few hundred ms); it ends by itself once kubeadm,
// seen running, has exited, or after 15 minutes, so a cancelled run
// leaves nothing behind.
func manifestReplaced(ctx context.Context, node cluster.Node, file, sum, process string) ([]string, bool) {
	const loop = `seen= pids=
while [ "$(sha256sum < "$1" 2>/dev/null | cut -d' ' -f1)" = "$2" ]; do
	if pgrep -x kubeadm >/dev/null; then seen=1; elif [ -n "$seen" ]; then exit 3; fi
	pids=$(pgrep -x "$3")
	sleep 0.3
done
echo $pids`
	out, err := node.Run(ctx, "timeout", "900", "sh", "-c", loop, "sh", file, sum, process)
	return strings.Fields(out), err == nil && ctx.Err() == nil
}

// installBinaries replaces binaries in a running node by rename, so a
// running program keeps its old file until it restarts.
func installBinaries(ctx context.Context, c *cluster.Cluster, node, dir string, names ...string) error {
	n, err := c.Node(ctx, node)
	if err != nil {
		return err
	}
	for _, b := range names {
		body, err := os.ReadFile(filepath.Join(dir, b))
		if err != nil {
			return fmt.Errorf("failed to read %s: %w", b, err)
		}
		if err := n.WriteFile(ctx, "/usr/bin/"+b, body, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// loadImages loads the images of art into the nodes that run them, as
// an operator pre-pulls before `kubeadm upgrade`: a control plane gets
// every one, a worker all but the static Pods' (kube-apiserver,
// kube-controller-manager, kube-scheduler, etcd), which kubeadm runs on
// control planes only; kube-proxy runs on every node and CoreDNS's
// Deployment may land on any. A node that holds an image already is not
// given it again (cluster.LoadImageTarsFor).
func loadImages(ctx context.Context, c *cluster.Cluster, art *nodeimage.Artifacts) error {
	workers := workerTars(art)
	return c.LoadImageTarsFor(ctx, func(n cluster.Node) []string {
		if n.Role == cluster.RoleControlPlane {
			return art.ImageTars
		}
		return workers
	})
}

// workerTars are the tars of art a worker runs, in art.ImageTars' order.
func workerTars(art *nodeimage.Artifacts) []string {
	staticPod := map[string]bool{}
	for ref, tar := range art.Tars {
		name := ref
		if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			name = ref[:i]
		}
		switch name[strings.LastIndex(name, "/")+1:] {
		case "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd":
			staticPod[tar] = true
		}
	}
	var tars []string
	for _, t := range art.ImageTars {
		if !staticPod[t] {
			tars = append(tars, t)
		}
	}
	return tars
}
