package certification

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
)

const kubeletAccessID promise.ID = "rollout.kubelet-access"

// KubeletRead is one read of a kubelet's API through one apiserver: the
// last line of a Pod's log on Node, asked of APIServer's own endpoint.
type KubeletRead struct {
	APIServer, Node, Pod string
	Err                  error
}

// CheckKubeletAccess judges rollout.kubelet-access after a rollout: every
// control plane's own apiserver reads a Pod's log on every node - the
// apiserver's client of the kubelets, the path of kubectl logs, exec and
// port-forward. kubeadm 1.36 gives that client's certificate no group and
// grants its user the kubelets' API by a ClusterRoleBinding that only
// init and upgrade apply create: a rollout that joins 1.36 control planes
// without it leaves their apiservers answering 403.
func CheckKubeletAccess(ctx context.Context, c *cluster.Cluster, after string) promise.Verdict {
	reads, err := readKubelets(ctx, c)
	if err != nil {
		return promise.Verdict{ID: kubeletAccessID, Outcome: promise.Error, Reason: fmt.Sprintf("after %s: %v", after, err)}
	}
	return JudgeKubeletAccess(after, reads)
}

// readKubelets reads, through each control plane's apiserver, the last
// line of kube-proxy's log on each node (every node runs one).
func readKubelets(ctx context.Context, c *cluster.Cluster) ([]KubeletRead, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
	if err != nil {
		return nil, fmt.Errorf("failed to list kube-proxy's Pods: %w", err)
	}
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return nil, err
	}
	var reads []KubeletRead
	for _, cp := range cps {
		api, err := c.APIServerClient(ctx, cp)
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				continue
			}
			one := int64(1)
			_, err := api.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &one}).DoRaw(ctx)
			reads = append(reads, KubeletRead{APIServer: cp.Name, Node: p.Spec.NodeName, Pod: p.Name, Err: err})
		}
	}
	return reads, nil
}

// JudgeKubeletAccess is rollout.kubelet-access on the reads made after
// a rollout: each must have succeeded. Floor: a read through some
// apiserver of some node's kubelet, or nothing was shown.
func JudgeKubeletAccess(after string, reads []KubeletRead) promise.Verdict {
	if len(reads) == 0 {
		return promise.Verdict{ID: kubeletAccessID, Outcome: promise.Error, Reason: fmt.Sprintf("after %s: no apiserver read any kubelet's API: no control plane, or no running kube-proxy Pod to read the log of", after)}
	}
	servers, nodes := map[string]bool{}, map[string]bool{}
	var failed []string
	for _, r := range reads {
		servers[r.APIServer], nodes[r.Node] = true, true
		if r.Err != nil {
			failed = append(failed, fmt.Sprintf("through %s's apiserver, the log of %s on %s: %v", r.APIServer, r.Pod, r.Node, r.Err))
		}
	}
	if len(failed) > 0 {
		return fail(kubeletAccessID, "after %s: %d of %d reads of a kubelet's API failed: %s", after, len(failed), len(reads), strings.Join(failed, "; "))
	}
	return promise.Verdict{ID: kubeletAccessID, Outcome: promise.Pass,
		Evidence: []string{fmt.Sprintf("after %s: each of %d apiservers read a Pod's log on each of %d nodes", after, len(servers), len(nodes))}}
}
