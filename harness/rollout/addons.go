package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// upgradeAddons moves kube-proxy and CoreDNS to target's, as `kubeadm
// upgrade apply` does once the control plane is: a surge never runs
// upgrade apply, so without it the addons stay at the version the cluster
// was made at. Every node first gets target's addon images (a worker's
// node image holds its own version's), then kubeadm's addon phase runs on
// a control plane, and the new Pods are awaited. tars are the target's
// image tars on the host, where they were built.
func upgradeAddons(target version.Version, tars map[string]string) Action {
	return Do("upgrade kubeadm's addons (kube-proxy, CoreDNS) to "+target.String(), func(ctx context.Context, c *cluster.Cluster) error {
		cps, err := c.ControlPlanes(ctx)
		if err != nil {
			return err
		}
		if len(cps) == 0 {
			return fmt.Errorf("no control plane to run kubeadm on")
		}
		cp := cps[0]
		out, err := cp.Run(ctx, "kubeadm", "config", "images", "list", "--kubernetes-version", target.String())
		if err != nil {
			return err
		}
		var refs []string
		for _, ref := range strings.Fields(out) {
			if strings.Contains(ref, "/kube-proxy:") || strings.Contains(ref, "/coredns:") {
				refs = append(refs, ref)
			}
		}
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return err
		}
		if err := c.ShareImages(ctx, nodes, tars, refs...); err != nil {
			return err
		}
		out, err = cp.Run(ctx, "kubeadm", "upgrade", "apply", "phase", "addon", "all", target.String(), "--kubeconfig", "/etc/kubernetes/admin.conf")
		if err != nil {
			return err
		}
		// kubeadm skips the addons, and exits 0, while a kube-apiserver Pod
		// of another version is left.
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "Skipping upgrade of addons") {
				return fmt.Errorf("kubeadm on %s: %s", cp.Name, strings.TrimSpace(line))
			}
		}
		return waitAddons(ctx, c, refs)
	})
}

// waitAddons waits until kube-proxy and CoreDNS run refs, kube-proxy
// updated on every node and CoreDNS rolled out.
func waitAddons(ctx context.Context, c *cluster.Cluster, refs []string) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	return wait.For(ctx, "rollout/addons", "kube-proxy updated on every node and CoreDNS rolled out", func(ctx context.Context) (bool, string, error) {
		ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := ds.Status
		proxyDone := ds.Generation == st.ObservedGeneration && st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		dnsDone := d.Generation == d.Status.ObservedGeneration && d.Status.UpdatedReplicas == replicas && d.Status.AvailableReplicas == replicas && d.Status.Replicas == replicas
		running := []string{ds.Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Spec.Containers[0].Image}
		for _, image := range running {
			if !slices.Contains(refs, image) {
				return false, "", fmt.Errorf("kubeadm's addon phase left %s, not one of %v", image, refs)
			}
		}
		return proxyDone && dnsDone, fmt.Sprintf("kube-proxy %d updated, %d available of %d; CoreDNS %d updated, %d available of %d",
			st.UpdatedNumberScheduled, st.NumberAvailable, st.DesiredNumberScheduled, d.Status.UpdatedReplicas, d.Status.AvailableReplicas, replicas), nil
	})
}
