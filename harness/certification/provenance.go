package certification

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// host is the machine the certification runs on, as results.json records
// it.
func host(ctx context.Context) *report.Host {
	h := &report.Host{Cgroup: "v2", Cores: runtime.NumCPU()}
	if cluster.CgroupV1() {
		h.Cgroup = "v1"
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	h.Docker, _ = docker.ServerVersion(ctx)
	return h
}

// apiserverManifest is kubeadm's static Pod for the apiserver.
const apiserverManifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"

// Components reads what each node of c runs, from the running cluster:
// the kubelet's version from its Node, and on a control plane the version
// its apiserver answers and the command line of its static Pod.
func Components(ctx context.Context, c *cluster.Cluster) ([]report.Component, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []report.Component
	for _, n := range nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		comp := report.Component{Node: n.Name, Role: n.Role, Kubelet: node.Status.NodeInfo.KubeletVersion}
		if n.Role == cluster.RoleControlPlane {
			acs, err := c.APIServerClient(ctx, n)
			if err != nil {
				return nil, err
			}
			v, err := acs.Discovery().ServerVersion()
			if err != nil {
				return nil, fmt.Errorf("the apiserver of %s: %w", n.Name, err)
			}
			comp.APIServer = v.GitVersion
			if comp.APIServerFlags, err = apiserverFlags(ctx, n); err != nil {
				return nil, err
			}
		}
		out = append(out, comp)
	}
	return out, nil
}

// apiserverFlags is the command line of n's apiserver static Pod.
func apiserverFlags(ctx context.Context, n cluster.Node) ([]string, error) {
	raw, err := n.ReadFile(ctx, apiserverManifest)
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(raw, &pod); err != nil || len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s on %s is not a Pod: %v", apiserverManifest, n.Name, err)
	}
	return append(pod.Spec.Containers[0].Command, pod.Spec.Containers[0].Args...), nil
}
