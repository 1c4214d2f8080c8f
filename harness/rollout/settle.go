package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// configSource is the annotation the kubelet puts on a static Pod
// ("file"); on its mirror Pod in the API it puts
// corev1.MirrorPodAnnotationKey (config.mirror: the static Pod's UID, the
// hash the kubelet computes of the manifest as it decodes it).
const configSource = "kubernetes.io/config.source"

// staticPodsSettled waits until node's kubelet, just restarted as another
// version, runs the node's static Pods as it now sees them, and nothing
// left of them from before. A kubelet of another version may hash the same
// manifest to another UID (its decoding defaults other fields): it then
// treats the running containers as orphans and starts the Pods again, and
// a new etcd or apiserver that starts before its orphan is killed cannot
// bind its host port and exits once (seen in a vendor's in-place run: etcd,
// the apiserver and the controller manager of the last control plane,
// "bind: address already in use", a second after its kubelet's restart).
// Until this holds the restart is still taking effect on the node; a step
// that waits for it owns those restarts, instead of leaving them to
// whatever step comes next.
func staticPodsSettled(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	// kubeadm is done with the node: its manifests stay as they are, and
	// each look is then one exec into the node (crictl), not two.
	ls, err := node.Run(ctx, "ls", "/etc/kubernetes/manifests")
	if err != nil {
		return fmt.Errorf("%s's static Pod manifests: %w", node.Name, err)
	}
	manifests := len(strings.Fields(ls))
	return wait.For(ctx, "rollout/static-pods-settled", node.Name+"'s static Pods running as its kubelet computes them",
		func(ctx context.Context) (bool, string, error) {
			ok, seen := staticPodsAsRun(ctx, cs, node, manifests)
			return ok, seen, nil
		})
}

// staticPodsAsRun reads the kubelet's own Pods (through the apiserver's
// node proxy), the mirror Pods and the node's running containers, and says
// whether they agree with each other and with the manifests the node has
// (settled), and if not what it saw.
func staticPodsAsRun(ctx context.Context, cs kubernetes.Interface, node cluster.Node, manifests int) (bool, string) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name, "proxy", "pods").DoRaw(ctx)
	if err != nil {
		return false, "its kubelet's Pods: " + err.Error()
	}
	var kubelet corev1.PodList
	if err := json.Unmarshal(raw, &kubelet); err != nil {
		return false, "its kubelet's Pods: " + err.Error()
	}
	list, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		return false, "its mirror Pods: " + err.Error()
	}
	running, err := runningContainers(ctx, node)
	if err != nil {
		return false, err.Error()
	}
	return settled(manifests, kubelet.Items, list.Items, running)
}

// runningContainer is a container the node's runtime runs, by the labels
// the kubelet gave it: its Pod's name and UID.
type runningContainer struct{ pod, uid, name string }

func runningContainers(ctx context.Context, node cluster.Node) ([]runningContainer, error) {
	out, err := node.Run(ctx, "crictl", "ps", "--state", "running", "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("crictl on %s: %w", node.Name, err)
	}
	var ps struct {
		Containers []struct {
			Labels map[string]string `json:"labels"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		return nil, fmt.Errorf("crictl ps on %s: %w", node.Name, err)
	}
	var rs []runningContainer
	for _, ctr := range ps.Containers {
		rs = append(rs, runningContainer{pod: ctr.Labels["io.kubernetes.pod.name"], uid: ctr.Labels["io.kubernetes.pod.uid"],
			name: ctr.Labels["io.kubernetes.container.name"]})
	}
	return rs, nil
}

// settled says whether the kubelet's static Pods (of manifests files)
// are each run as it computes them: every container of the Pod running
// under the Pod's UID and none under another, its mirror Pod in the API
// carrying that UID and Ready.
func settled(manifests int, kubelet, mirrors []corev1.Pod, running []runningContainer) (bool, string) {
	var static []corev1.Pod
	for _, p := range kubelet {
		if p.Annotations[configSource] == "file" {
			static = append(static, p)
		}
	}
	if len(static) < manifests {
		return false, fmt.Sprintf("its kubelet runs %d static Pods of %d manifests", len(static), manifests)
	}
	byName := map[string]corev1.Pod{}
	for _, m := range mirrors {
		byName[m.Name] = m
	}
	for _, p := range static {
		uid := string(p.UID)
		ours := 0
		for _, r := range running {
			switch {
			case r.pod != p.Name:
			case r.uid != uid:
				return false, fmt.Sprintf("%s's container %s still runs as Pod %s, not %s", p.Name, r.name, r.uid, uid)
			default:
				ours++
			}
		}
		if ours < len(p.Spec.Containers) {
			return false, fmt.Sprintf("%s: %d of %d containers running", p.Name, ours, len(p.Spec.Containers))
		}
		m, ok := byName[p.Name]
		switch {
		case !ok:
			return false, p.Name + " has no mirror Pod"
		case m.Annotations[corev1.MirrorPodAnnotationKey] != uid:
			return false, fmt.Sprintf("%s's mirror Pod is of %s, not %s", p.Name, m.Annotations[corev1.MirrorPodAnnotationKey], uid)
		case !podReady(&m):
			return false, p.Name + " is not Ready"
		}
	}
	return true, ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
