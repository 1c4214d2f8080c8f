package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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

// runningAddons are the images kube-proxy and CoreDNS run now.
func runningAddons(ctx context.Context, c *cluster.Cluster) (proxy, dns string, err error) {
	cs, err := c.Client()
	if err != nil {
		return "", "", err
	}
	ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("failed to read kube-proxy's DaemonSet: %w", err)
	}
	d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("failed to read CoreDNS's Deployment: %w", err)
	}
	return ds.Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Spec.Containers[0].Image, nil
}

// giveRunningAddons gives node the images kube-proxy and CoreDNS run now,
// from their host tars, and says whether it then holds kube-proxy's. An
// image with no tar here is left to the node's kubelet (a given node
// image's version): copying it node to node is what failed for joiners.
func giveRunningAddons(ctx context.Context, c *cluster.Cluster, node cluster.Node, tars map[string]string) (bool, error) {
	proxy, dns, err := runningAddons(ctx, c)
	if err != nil {
		return false, err
	}
	var refs []string
	for _, ref := range []string{proxy, dns} {
		if _, ok := tars[ref]; ok {
			refs = append(refs, ref)
		}
	}
	if err := c.ShareImages(ctx, []cluster.Node{node}, tars, refs...); err != nil {
		return false, err
	}
	has, err := node.HasImage(ctx, proxy)
	if err != nil || !has {
		return false, err
	}
	return true, restartPullBackOff(ctx, c, node)
}

// restartPullBackOff deletes node's kube-proxy Pod when it waits on a
// pull that failed before its image came: its DaemonSet makes it again
// at once, where the kubelet would retry the pull only when its backoff
// (doubling from 10 s) runs out - ~40 s of a joiner's step, measured.
func restartPullBackOff(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	pods, err := nodeProxies(ctx, cs, node)
	if err != nil {
		return fmt.Errorf("failed to list kube-proxy on %s: %w", node.Name, err)
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if w := st.State.Waiting; w != nil && (w.Reason == "ImagePullBackOff" || w.Reason == "ErrImagePull") {
				if err := cs.CoreV1().Pods("kube-system").Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("failed to restart %s, waiting on its image: %w", p.Name, err)
				}
			}
		}
	}
	return nil
}

// waitNodeProxy waits until node's kube-proxy Pod is Ready: Services
// reach their endpoints from it (an apiserver calling a webhook, say).
func waitNodeProxy(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	return wait.For(ctx, "rollout/node-proxy", "kube-proxy Ready on "+node.Name, func(ctx context.Context) (bool, string, error) {
		pods, err := nodeProxies(ctx, cs, node)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%s: %s", p.Name, podWaiting(&p)), nil
		}
		return false, "no kube-proxy Pod on it yet", nil
	})
}

// nodeProxies are the kube-proxy Pods on node.
func nodeProxies(ctx context.Context, cs kubernetes.Interface, node cluster.Node) (*corev1.PodList, error) {
	return cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy", FieldSelector: "spec.nodeName=" + node.Name})
}

// podWaiting says why a Pod's containers are not running, or its phase.
func podWaiting(p *corev1.Pod) string {
	for _, st := range p.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			return w.Reason + ": " + w.Message
		}
	}
	return string(p.Status.Phase)
}
