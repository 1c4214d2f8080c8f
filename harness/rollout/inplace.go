package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

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
		actions = append(actions, Do("load the "+target.String()+" images into every node", func(ctx context.Context, c *cluster.Cluster) error {
			return c.LoadImageTars(ctx, in.Artifacts.ImageTars...)
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
			// kubeadm upgrades a node's etcd member while its apiserver,
			// which reads that member only, keeps serving: every client
			// on it would stall until the member is back, a minute here
			// (kubernetes/kubeadm#2991, closed with the advice to stop
			// the apiserver first). Its clients are moved off first.
			DoOn(on(name), fmt.Sprintf("take %s out of the load balancer and move its clients to the others", name), func(ctx context.Context, c *cluster.Cluster) error {
				n, err := c.Node(ctx, name)
				if err != nil {
					return err
				}
				return moveClientsOff(ctx, c, n)
			}),
			DoOn(on(name), fmt.Sprintf("copy %s kubeadm and kubectl into %s", target, name), func(ctx context.Context, c *cluster.Cluster) error {
				return installBinaries(ctx, c, name, in.Artifacts.BinDir, "kubeadm", "kubectl")
			}),
			DoOn(on(name), what+" on "+name, func(ctx context.Context, c *cluster.Cluster) error {
				n, err := c.Node(ctx, name)
				if err != nil {
					return err
				}
				_, err = n.Run(ctx, upgrade...)
				return err
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
			DoOn(on(name), fmt.Sprintf("wait for %s Ready and its apiserver at %s", name, target), func(ctx context.Context, c *cluster.Cluster) error {
				n, err := c.Node(ctx, name)
				if err != nil {
					return err
				}
				return waitControlPlane(ctx, c, n, target)
			}),
			DoOn(on(name), fmt.Sprintf("put %s back into the load balancer", name), func(ctx context.Context, c *cluster.Cluster) error {
				return syncLoadBalancer(ctx, c)
			}),
		)
	}
	return actions, nil
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
