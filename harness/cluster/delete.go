package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	kind "sigs.k8s.io/kind/pkg/cluster"

	"github.com/skewer-k8s/skewer/internal/docker"
)

// Delete removes the cluster's containers and network entries, and its
// state directory unless keepFiles is set.
func (c *Cluster) Delete(ctx context.Context, keepFiles bool) error {
	if err := deleteNodes(ctx, c.provider, c.Name, c.Kubeconfig()); err != nil {
		return err
	}
	if !keepFiles {
		return os.RemoveAll(c.Dir)
	}
	return nil
}

// RemoveState removes the state folder of a cluster named name that does
// not exist (a create that failed, a cluster deleted by other means), and
// says whether there was one: a next cluster of that name would take up
// its kept logs, audit logs and rollout record as its own.
func RemoveState(name string, o Options) (bool, error) {
	o.defaults()
	dir := filepath.Join(o.StateDir, name)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("failed to remove the state folder %s: %w", dir, err)
	}
	return true, nil
}

// Remove deletes the kind cluster named name, in whatever state it is -
// one whose create was killed before kubeadm init wrote its admin.conf
// has no kubeconfig to Open it by - and its state folder, and says
// which of the two there was.
func Remove(ctx context.Context, name string, o Options) (cluster, state bool, err error) {
	o.defaults()
	provider := newProvider(newProgress(o.Out, o.Verbosity))
	names, err := provider.List()
	if err != nil {
		return false, false, fmt.Errorf("failed to list kind clusters: %w", err)
	}
	if slices.Contains(names, name) {
		if err := deleteNodes(ctx, provider, name, layout{filepath.Join(o.StateDir, name)}.kubeconfig()); err != nil {
			return false, false, err
		}
		cluster = true
	}
	state, err = RemoveState(name, o)
	return cluster, state, err
}

// deleteNodes deletes the kind cluster name through kind. Where the
// engine could not kill a node ("did not receive an exit event": on
// cgroup v1, a process left in a cgroup runc failed to freeze, which no
// SIGKILL reaches), what is left goes through docker.Remove, which thaws
// such cgroups and asks again; then kind once more, for the kubeconfig.
func deleteNodes(ctx context.Context, provider *kind.Provider, name, kubeconfig string) error {
	err := provider.Delete(name, kubeconfig)
	if err == nil {
		return nil
	}
	left, lerr := docker.Containers(ctx, "label="+clusterLabel+"="+name)
	if lerr == nil && len(left) > 0 {
		if rerr := docker.Remove(ctx, left...); rerr == nil {
			err = provider.Delete(name, kubeconfig)
		}
	}
	if err != nil {
		return fmt.Errorf("failed to delete cluster %q: %w", name, err)
	}
	return nil
}
