package rollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// A worker is replaced by surge, as a node pool upgrade does it: AddWorker
// brings a new one at the newer version, DrainWorker moves the old one's
// Pods over, RemoveWorker takes it out. They are apart so a check can look
// at the old node between the drain and the removal.

// AddWorker starts a worker from v's node image, joins it with kubeadm
// through the bootstrap control plane, registered with taints if any, and
// waits until its Node is Ready with its kubelet at v.
func AddWorker(ctx context.Context, c *cluster.Cluster, v version.Version, taints ...corev1.Taint) (cluster.Node, error) {
	boot, err := c.BootstrapControlPlane(ctx)
	if err != nil {
		return cluster.Node{}, err
	}
	node, err := c.AddWorkerContainer(ctx, c.NodeImage(v))
	if err != nil {
		return cluster.Node{}, err
	}
	if err := JoinWorker(ctx, c, boot, node, taints...); err != nil {
		return node, err
	}
	return node, WaitReady(ctx, c, "rollout/worker-ready", node.Name, v)
}

// WaitReady waits, within the wait budget named, until node is Ready with
// its kubelet reporting v: a node joined, or its kubelet restarted.
func WaitReady(ctx context.Context, c *cluster.Cluster, budget, node string, v version.Version) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	return wait.For(ctx, budget, fmt.Sprintf("node %s Ready, its kubelet at %s", node, v), func(ctx context.Context) (bool, string, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ok, seen := kubeletReady(n, v)
		return ok, seen, nil
	})
}

// DrainWorker cordons node and evicts its Pods (not the DaemonSets'),
// waiting until they are gone.
func DrainWorker(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	return drain(ctx, c, node.Name)
}

// RemoveWorker takes a drained worker out for good: kubeadm reset, its
// Node and Pods, its container.
func RemoveWorker(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	if _, err := node.Run(ctx, "kubeadm", "reset", "--force", "--v=2"); err != nil {
		return fmt.Errorf("kubeadm reset on %s: %w", node.Name, err)
	}
	return removeNode(ctx, c, node)
}
