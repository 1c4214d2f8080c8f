package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/internal/docker"
)

// SetKubernetesVersion moves the cluster's ClusterConfiguration to version:
// the version `kubeadm join --control-plane` deploys, whatever the joiner's.
// It returns the version it replaced.
func (c *Cluster) SetKubernetesVersion(ctx context.Context, version string) (string, error) {
	cs, err := c.Client()
	if err != nil {
		return "", err
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to read kubeadm-config: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cfg); err != nil {
		return "", fmt.Errorf("failed to parse ClusterConfiguration: %w", err)
	}
	old, _ := cfg["kubernetesVersion"].(string)
	if old == version {
		return old, nil
	}
	cfg["kubernetesVersion"] = version
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	cm.Data["ClusterConfiguration"] = string(out)
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("failed to update kubeadm-config: %w", err)
	}
	return old, nil
}

// KubernetesVersion is the version in the cluster's ClusterConfiguration.
func (c *Cluster) KubernetesVersion(ctx context.Context) (string, error) {
	cs, err := c.Client()
	if err != nil {
		return "", err
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var cfg struct {
		KubernetesVersion string `json:"kubernetesVersion"`
	}
	err = yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cfg)
	return cfg.KubernetesVersion, err
}

// Drain cordons node and evicts its Pods, except DaemonSet and static
// ones, waiting until they are gone.
func (c *Cluster) Drain(ctx context.Context, node string) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to cordon %s: %w", node, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods, err := evictable(ctx, cs, node)
		if err != nil {
			return err
		}
		if len(pods) == 0 {
			return nil
		}
		for _, p := range pods {
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			if err := cs.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
				return fmt.Errorf("failed to evict %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain of %s: %d Pods still there after 3m (first: %s/%s)", node, len(pods), pods[0].Namespace, pods[0].Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func evictable(ctx context.Context, cs kubernetes.Interface, node string) ([]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
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

// RemoveControlPlane takes a drained control plane out for good: its
// backend in the load balancer, kubeadm reset (which removes its etcd
// member), its apiserver identity lease (so no peer keeps routing to it),
// its Node object and its container.
func (c *Cluster) RemoveControlPlane(ctx context.Context, node Node) error {
	// Out of the load balancer first, so no new connection goes to an
	// apiserver about to stop.
	if err := c.SyncLoadBalancer(ctx, node.Name); err != nil {
		return err
	}
	if _, err := node.Run(ctx, "kubeadm", "reset", "--force", "--v=2"); err != nil {
		return fmt.Errorf("kubeadm reset on %s: %w", node.Name, err)
	}
	if err := c.forget(ctx, node.Name); err != nil {
		return err
	}
	return docker.Remove(ctx, node.Name)
}

// DiscardControlPlane takes out whatever exists of a control plane that
// never finished joining, or whose removal was cut short. Unlike
// RemoveControlPlane it first stops a kubeadm still running in the node (a
// cancelled `docker exec` leaves it running), and goes on past a reset that
// fails: the container goes in any case, and the etcd member, if one was
// added, is left to PruneEtcdMembers.
func (c *Cluster) DiscardControlPlane(ctx context.Context, node Node) error {
	if err := c.SyncLoadBalancer(ctx, node.Name); err != nil {
		return err
	}
	_, _ = node.Run(ctx, "pkill", "-9", "-x", "kubeadm")
	_, _ = node.Run(ctx, "kubeadm", "reset", "--force", "--v=2")
	if err := c.forget(ctx, node.Name); err != nil {
		return err
	}
	return docker.Remove(ctx, node.Name)
}

// forget deletes what the API keeps of a control plane: its apiserver
// identity lease and its Node.
func (c *Cluster) forget(ctx context.Context, name string) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	leases, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver,kubernetes.io/hostname=" + name})
	if err != nil {
		return err
	}
	for _, l := range leases.Items {
		if err := cs.CoordinationV1().Leases("kube-system").Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete apiserver identity lease %s: %w", l.Name, err)
		}
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete Node %s: %w", name, err)
	}
	return nil
}

// PruneEtcdMembers removes, through via's etcd, every member that no
// control-plane container carries (one a cut-short join added), and
// returns their names.
func (c *Cluster) PruneEtcdMembers(ctx context.Context, via Node) ([]string, error) {
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return nil, err
	}
	members, err := c.etcdMemberList(ctx, via)
	if err != nil {
		return nil, err
	}
	var pruned []string
	for _, m := range members {
		if slices.ContainsFunc(cps, func(n Node) bool { return n.Name == m.Name }) {
			continue
		}
		if _, err := via.Run(ctx, "sh", "-c", etcdctl+fmt.Sprintf(" member remove %x", m.ID)); err != nil {
			return pruned, fmt.Errorf("failed to remove etcd member %q (%x): %w", m.Name, m.ID, err)
		}
		pruned = append(pruned, fmt.Sprintf("%s (%x)", m.Name, m.ID))
	}
	return pruned, nil
}

// Uncordon makes a cordoned node schedulable again; it says whether it was
// cordoned.
func (c *Cluster) Uncordon(ctx context.Context, name string) (bool, error) {
	cs, err := c.Client()
	if err != nil {
		return false, err
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !n.Spec.Unschedulable {
		return false, nil
	}
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	_, err = cs.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{})
	return true, err
}

// APIServerIdentities lists the hostnames holding an apiserver identity
// lease: the peers a Mixed Version Proxy can route to.
func (c *Cluster) APIServerIdentities(ctx context.Context) ([]string, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	leases, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range leases.Items {
		out = append(out, l.Labels["kubernetes.io/hostname"])
	}
	sort.Strings(out)
	return out, nil
}

// etcdctl runs etcdctl in a node's etcd container, as that member.
const etcdctl = `id=$(crictl ps -q --name '^etcd$' | head -1) && crictl exec "$id" etcdctl \
  --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
  --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key`

type etcdMember struct {
	ID   uint64 `json:"ID"`
	Name string `json:"name"`
}

func (c *Cluster) etcdMemberList(ctx context.Context, via Node) ([]etcdMember, error) {
	out, err := via.Run(ctx, "sh", "-c", etcdctl+" member list -w json")
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd members: %w", err)
	}
	var list struct {
		Members []etcdMember `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("failed to read etcd member list %q: %w", out, err)
	}
	return list.Members, nil
}

// EtcdMembers lists the names of etcd's members, asked of member's etcd.
// A member added but not started yet has no name: it is listed as "".
func (c *Cluster) EtcdMembers(ctx context.Context, member Node) ([]string, error) {
	list, err := c.etcdMemberList(ctx, member)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range list {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names, nil
}
