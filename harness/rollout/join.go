package rollout

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
)

// pkiFiles are what a joining control plane needs from the cluster, the
// same files kind copies from its bootstrap control plane.
var pkiFiles = []string{
	"/etc/kubernetes/admin.conf",
	"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key",
	"/etc/kubernetes/pki/front-proxy-ca.crt", "/etc/kubernetes/pki/front-proxy-ca.key",
	"/etc/kubernetes/pki/sa.pub", "/etc/kubernetes/pki/sa.key",
	"/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/etcd/ca.key",
}

// StartControlPlane starts a new control-plane node container from the
// node image of v, the way kind starts one, and waits for its systemd. It
// does not join it; JoinControlPlane does.
func StartControlPlane(ctx context.Context, c *cluster.Cluster, v version.Version) (cluster.Node, error) {
	return c.AddControlPlaneContainer(ctx, c.NodeImage(v))
}

// JoinControlPlane joins a started node to the cluster as a control plane
// with kubeadm, the way kind joins its secondary control planes: the
// cluster's certificates copied from member, containerd configured as the
// member's, a fresh bootstrap token. kubeadm deploys the components of the
// cluster's ClusterConfiguration version (setClusterVersion moves it).
func JoinControlPlane(ctx context.Context, c *cluster.Cluster, member, node cluster.Node) error {
	return join(ctx, c, member, node, joinSpec{controlPlane: true})
}

// JoinWorker joins a started node to the cluster as a worker with
// kubeadm, the way kind joins its workers: containerd configured as
// member's, a fresh bootstrap token.
// It registers with taints, if any: a worker held out of scheduling
// until its caller lets Pods in.
func JoinWorker(ctx context.Context, c *cluster.Cluster, member, node cluster.Node, taints ...corev1.Taint) error {
	return join(ctx, c, member, node, joinSpec{taints: taints})
}

func join(ctx context.Context, c *cluster.Cluster, member, node cluster.Node, spec joinSpec) error {
	// containerd's configuration (its registry hosts, and on a cgroup v1
	// host the cgroupfs driver kind's nodes were given) and, for a control
	// plane, the cluster's certificates and keys, as the member keeps them
	// (modes included).
	files := []string{"/etc/containerd/config.toml"}
	if spec.controlPlane {
		files = append(files, pkiFiles...)
	}
	if err := cluster.CopyFiles(ctx, member, node, files...); err != nil {
		return fmt.Errorf("failed to copy the node's configuration from %s: %w", member.Name, err)
	}
	if _, err := node.Run(ctx, "systemctl", "restart", "containerd"); err != nil {
		return err
	}
	token, err := member.Run(ctx, "kubeadm", "token", "create", "--ttl", "30m", "--kubeconfig", "/etc/kubernetes/admin.conf")
	if err != nil {
		return fmt.Errorf("failed to create a bootstrap token: %w", err)
	}
	ip, err := node.IP()
	if err != nil {
		return err
	}
	raw, err := node.ReadFile(ctx, "/kind/version")
	if err != nil {
		return err
	}
	v, err := version.Parse(string(raw))
	if err != nil {
		return fmt.Errorf("%s: /kind/version: %w", node.Name, err)
	}
	cfg, _, err := clusterConfiguration(ctx, c)
	if err != nil {
		return err
	}
	endpoint, _ := cfg["controlPlaneEndpoint"].(string)
	if endpoint == "" {
		return fmt.Errorf("kubeadm's ClusterConfiguration names no controlPlaneEndpoint to join through")
	}
	spec.apiVersion, spec.endpoint, spec.cluster, spec.node, spec.ip, spec.token = cluster.KubeadmAPIVersion(v), endpoint, c.Name, node.Name, ip, token
	conf := joinConfiguration(spec)
	if err := node.WriteFile(ctx, "/kind/kubeadm.conf", []byte(conf), 0o644); err != nil {
		return err
	}
	if _, err := runKept(ctx, node, "/var/log/skewer-kubeadm-join.log", "kubeadm", "join", "--config", "/kind/kubeadm.conf", "--v=2"); err != nil {
		return fmt.Errorf("failed to join %s with kubeadm: %w", node.Name, err)
	}
	return nil
}

// joinSpec is what a node's JoinConfiguration says: kubeadm's API
// version, the endpoint it joins through, the cluster's and the node's
// names, its address, the bootstrap token, whether it joins as a control
// plane, and the taints it registers with (none: kubeadm's default).
type joinSpec struct {
	apiVersion, endpoint, cluster, node, ip, token string
	controlPlane                                   bool
	taints                                         []corev1.Taint
}

// joinConfiguration is the JoinConfiguration kind would give a secondary
// control plane (or, without controlPlane, a worker), joining through
// endpoint - the cluster's controlPlaneEndpoint: its load balancer, or
// its one control plane - with preflight skipped as kind skips it (its
// system checks refuse a cgroup v1 host outright).
func joinConfiguration(j joinSpec) string {
	args := func(pairs ...string) string {
		var b strings.Builder
		for i := 0; i < len(pairs); i += 2 {
			if j.apiVersion == "v1beta4" {
				fmt.Fprintf(&b, "    - name: %q\n      value: %q\n", pairs[i], pairs[i+1])
			} else {
				fmt.Fprintf(&b, "    %q: %q\n", pairs[i], pairs[i+1])
			}
		}
		return b.String()
	}
	cp := ""
	if j.controlPlane {
		cp = fmt.Sprintf("controlPlane:\n  localAPIEndpoint:\n    advertiseAddress: %q\n    bindPort: %d\n", j.ip, cluster.APIServerPort)
	}
	taints := ""
	if len(j.taints) > 0 {
		taints = "  taints:\n"
		for _, t := range j.taints {
			taints += fmt.Sprintf("  - key: %q\n    value: %q\n    effect: %q\n", t.Key, t.Value, t.Effect)
		}
	}
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/%s
kind: JoinConfiguration
%snodeRegistration:
  criSocket: unix:///run/containerd/containerd.sock
%s  kubeletExtraArgs:
%sdiscovery:
  bootstrapToken:
    apiServerEndpoint: %q
    token: %q
    unsafeSkipCAVerification: true
skipPhases:
- preflight
`, j.apiVersion, cp, taints,
		args("node-ip", j.ip, "provider-id", fmt.Sprintf("kind://docker/%s/%s", j.cluster, j.node), "node-labels", ""),
		j.endpoint, j.token)
}
