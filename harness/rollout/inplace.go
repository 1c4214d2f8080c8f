package rollout

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// InPlaceInput says where an in-place rollout goes.
type InPlaceInput struct {
	// To is the version every control plane ends at.
	To string
	// PauseAfter stops after this many control planes (0: all).
	PauseAfter int
	// Artifacts are To's binaries and image tars (nodeimage.Builder.Artifacts).
	Artifacts *nodeimage.Artifacts
}

// InPlace plans the kinder way: the target's images loaded into every node,
// `kubeadm upgrade apply` on the first control plane and `kubeadm upgrade
// node` on the others, each node's kubelet replaced and restarted. kubeadm
// does not downgrade: a rollback is a surge back.
func InPlace(ctx context.Context, c *cluster.Cluster, in InPlaceInput) ([]Action, error) {
	if in.Artifacts == nil {
		return nil, fmt.Errorf("in-place rollout needs the target's artifacts")
	}
	old, _, target, err := toMove(ctx, c, in.To, false)
	if err != nil {
		return nil, err
	}
	sort.Strings(old) // the bootstrap node first: upgrade apply runs there
	clusterVersion, err := c.KubernetesVersion(ctx)
	if err != nil {
		return nil, err
	}
	if in.PauseAfter > 0 && in.PauseAfter < len(old) {
		old = old[:in.PauseAfter]
	}
	actions := []Action{Do("load the "+target+" images into every node", func(ctx context.Context, c *cluster.Cluster) error {
		return c.LoadImageTars(ctx, in.Artifacts.ImageTars...)
	})}
	for _, name := range old {
		// kubeadm's preflight refuses a cgroup v1 host outright; kind skips it too.
		upgrade := []string{"kubeadm", "upgrade", "node", "--ignore-preflight-errors=all", "--v=2"}
		what := "kubeadm upgrade node"
		if clusterVersion != target {
			upgrade = []string{"kubeadm", "upgrade", "apply", target, "--yes", "--ignore-preflight-errors=all", "--v=2"}
			what = "kubeadm upgrade apply " + target
			clusterVersion = target
		}
		actions = append(actions,
			Do(fmt.Sprintf("copy %s kubeadm and kubectl into %s", target, name), func(ctx context.Context, c *cluster.Cluster) error {
				return installBinaries(ctx, name, in.Artifacts.BinDir, "kubeadm", "kubectl")
			}),
			Do(what+" on "+name, func(ctx context.Context, c *cluster.Cluster) error {
				_, err := docker.Exec(ctx, name, upgrade...)
				return err
			}),
			Do(fmt.Sprintf("replace %s's kubelet with %s and restart it", name, target), func(ctx context.Context, c *cluster.Cluster) error {
				if err := installBinaries(ctx, name, in.Artifacts.BinDir, "kubelet"); err != nil {
					return err
				}
				_, err := docker.Exec(ctx, name, "sh", "-c", fmt.Sprintf("echo %s > /kind/version && systemctl restart kubelet", target))
				return err
			}),
			Do(fmt.Sprintf("wait for %s Ready and its apiserver at %s", name, target), func(ctx context.Context, c *cluster.Cluster) error {
				n, err := nodeByName(ctx, c, name)
				if err != nil {
					return err
				}
				return waitControlPlane(ctx, c, n, target)
			}),
		)
	}
	return actions, nil
}

// installBinaries replaces binaries in a running node by rename, so a
// running program keeps its old file until it restarts.
func installBinaries(ctx context.Context, node, dir string, names ...string) error {
	for _, b := range names {
		tmp := "/usr/bin/." + b + ".new"
		if err := docker.Copy(ctx, filepath.Join(dir, b), node, tmp); err != nil {
			return err
		}
		if _, err := docker.Exec(ctx, node, "mv", tmp, "/usr/bin/"+b); err != nil {
			return err
		}
	}
	return nil
}
