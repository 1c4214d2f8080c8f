package rollout

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/wait"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// drain cordons node and evicts its Pods, except DaemonSet and static
// ones, waiting until they are gone.
func drain(ctx context.Context, c *cluster.Cluster, node string) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to cordon %s: %w", node, err)
	}
	return wait.For(ctx, "rollout/drain", "the Pods of "+node+" evicted", func(ctx context.Context) (bool, string, error) {
		pods, err := evictable(ctx, cs, node)
		if err != nil || len(pods) == 0 {
			return err == nil, "", err
		}
		for _, p := range pods {
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			if err := cs.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev); !evictionWaits(err) {
				return false, "", fmt.Errorf("failed to evict %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		return false, fmt.Sprintf("%d Pods still there (first: %s/%s)", len(pods), pods[0].Namespace, pods[0].Name), nil
	})
}

// evictionWaits says whether an eviction's answer leaves the drain to
// wait for the Pod to go: evicted, gone already, held back by a
// disruption budget (429, asked again), or refused because its namespace
// is being deleted - the namespace's deletion removes it, and an eviction
// would never be admitted there (kubectl drain waits for such a Pod too).
func evictionWaits(err error) bool {
	return err == nil || apierrors.IsNotFound(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

func evictable(ctx context.Context, cs kubernetes.Interface, node string) ([]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("failed to list the Pods of %s: %w", node, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// moveClientsOff takes node out of the load balancer, so no new
// connection goes to its apiserver, and stops that apiserver: gracefully,
// which sends every connection it holds GOAWAY at once (kubeadm sets no
// --shutdown-delay-duration), so a kept-alive client reconnects through
// the load balancer to another before anything in the node stops
// serving; then, once it has begun to stop, killed
// (cluster.KillOnceStopping) - left to hold its watches, the kubelet on
// the node, which reads only this apiserver, could tell kubeadm nothing
// meanwhile. The kubelet starts it again outside the load balancer; the
// reset that follows removes it.
func moveClientsOff(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	if err := syncLoadBalancer(ctx, c, node.Name); err != nil {
		return err
	}
	_, err := stopAPIServer(ctx, c, node)
	return err
}

// stopAPIServer is moveClientsOff's stop: graceful, so every connection
// is sent away at once, then killed once it has begun to stop. It says
// which processes it stopped.
func stopAPIServer(ctx context.Context, c *cluster.Cluster, node cluster.Node) ([]string, error) {
	pids, err := cluster.APIServerPIDs(ctx, node)
	if err != nil {
		// pgrep fails when no process matched too: an apiserver the
		// kubelet is restarting holds no clients.
		if cs, cerr := c.APIServerClient(ctx, node); cerr == nil && cluster.Readyz(ctx, cs) == nil {
			return nil, fmt.Errorf("finding %s's apiserver: %w", node.Name, err)
		}
		return nil, nil
	}
	if _, err := node.Run(ctx, append([]string{"kill", "-TERM"}, pids...)...); err != nil {
		return nil, fmt.Errorf("the graceful stop of %s's apiserver: %w", node.Name, err)
	}
	return pids, c.KillOnceStopping(ctx, node, pids)
}

// removeControlPlane takes a drained control plane out for good: its
// clients moved to the others, its etcd member removed by kubeadm reset's
// own phase, its apiserver identity lease (so no peer keeps routing to
// it), its Node object and its container. The rest of kubeadm reset
// (stopping the kubelet, removing every container through the CRI,
// unmounting and deleting the node's files) cleans a machine that stays;
// the container goes, and all of that with it.
func removeControlPlane(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	// The etcd member goes first while the apiserver, which reads that
	// member only, would still serve (kubeadm#2991's shape).
	if err := moveClientsOff(ctx, c, node); err != nil {
		return err
	}
	if _, err := node.Run(ctx, "kubeadm", "reset", "phase", "remove-etcd-member", "--v=2"); err != nil {
		return fmt.Errorf("kubeadm reset phase remove-etcd-member on %s: %w", node.Name, err)
	}
	return removeNode(ctx, c, node)
}

// discardControlPlane takes out whatever exists of a control plane that
// never finished joining, or whose removal was cut short. Unlike
// removeControlPlane it first stops a kubeadm still running in the node (a
// cancelled `docker exec` leaves it running), and goes on past a reset that
// fails: the container goes in any case, and the etcd member, if one was
// added, is left to pruneEtcdMembers.
func discardControlPlane(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	if err := syncLoadBalancer(ctx, c, node.Name); err != nil {
		return err
	}
	_, _ = node.Run(ctx, "pkill", "-9", "-x", "kubeadm")
	_, _ = node.Run(ctx, "kubeadm", "reset", "--force", "--v=2")
	return removeNode(ctx, c, node)
}

// removeNode takes node away for good once it has left the cluster: what
// the API keeps of it (forget), its journals kept first (KeepNodeLogs),
// then its container.
func removeNode(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	if err := forget(ctx, c, node.Name); err != nil {
		return err
	}
	c.KeepNodeLogs(ctx, node)
	return docker.Remove(ctx, node.Name)
}

// forget deletes what the API keeps of a control plane: its apiserver
// identity lease, its Node and the Pods bound to it.
func forget(ctx context.Context, c *cluster.Cluster, name string) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	leases, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver,kubernetes.io/hostname=" + name})
	if err != nil {
		return fmt.Errorf("failed to list the identity leases of %s: %w", name, err)
	}
	for _, l := range leases.Items {
		if err := cs.CoordinationV1().Leases("kube-system").Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete apiserver identity lease %s: %w", l.Name, err)
		}
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete Node %s: %w", name, err)
	}
	// Its Pods too, at once, as the Pod garbage collector would within a
	// minute: until then its kube-apiserver mirror Pod says a control
	// plane still runs the old version, and kubeadm skips the addons'
	// upgrade for it.
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
	if err != nil {
		return fmt.Errorf("failed to list the Pods of %s: %w", name, err)
	}
	zero := int64(0)
	for _, p := range pods.Items {
		if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete Pod %s/%s of the removed %s: %w", p.Namespace, p.Name, name, err)
		}
	}
	return nil
}

// pruneEtcdMembers removes, through via's etcd, every member that no
// control-plane container carries (one a cut-short join added).
func pruneEtcdMembers(ctx context.Context, c *cluster.Cluster, via cluster.Node) error {
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	members, err := etcdMemberList(ctx, via)
	if err != nil {
		return err
	}
	for _, m := range members {
		if slices.ContainsFunc(cps, func(n cluster.Node) bool { return n.Name == m.Name }) {
			continue
		}
		if _, err := Etcdctl(ctx, via, "member", "remove", fmt.Sprintf("%x", m.ID)); err != nil {
			return fmt.Errorf("failed to remove etcd member %q (%x): %w", m.Name, m.ID, err)
		}
	}
	return nil
}

// uncordon makes a cordoned node schedulable again.
func uncordon(ctx context.Context, c *cluster.Cluster, name string) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && !n.Spec.Unschedulable) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read Node %s: %w", name, err)
	}
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to uncordon %s: %w", name, err)
	}
	return nil
}
