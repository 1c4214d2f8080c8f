package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// kind's container labels and the node files a control plane joins with.
const (
	clusterLabel = "io.x-k8s.kind.cluster"
	roleLabel    = "io.x-k8s.kind.role"
	cdsPath      = "/home/envoy/cds.yaml"
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

var cpIndexRE = regexp.MustCompile(`-control-plane(\d*)$`)

// nextControlPlaneName is a kind-style control-plane name after every one
// used so far, so a new node never inherits a removed node's name (nor its
// audit log).
func nextControlPlaneName(cluster string, used []string) string {
	highest := 0
	for _, n := range used {
		if m := cpIndexRE.FindStringSubmatch(n); m != nil {
			i := 1
			if m[1] != "" {
				i, _ = strconv.Atoi(m[1])
			}
			highest = max(highest, i)
		}
	}
	return kindNodeName(cluster, "control-plane", highest)
}

// StartControlPlaneNode starts a new control-plane node container at
// version, the way kind starts one (labels, network, privileges, mounts,
// the apiserver published on loopback), and waits for its systemd. It does
// not join it; JoinControlPlane does.
func (c *Cluster) StartControlPlaneNode(ctx context.Context, version string) (Node, error) {
	v, err := nodeimage.ParseVersion(version)
	if err != nil {
		return Node{}, err
	}
	image := nodeimage.Ref(v)
	if !docker.ImageExists(ctx, image) {
		return Node{}, fmt.Errorf("no node image %s (build it: skewer images build --version v%s)", image, v)
	}
	all, err := c.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	l := layout{c.Dir}
	names, _ := filepath.Glob(l.auditDir("*")) // removed nodes too
	for _, n := range all {
		names = append(names, n.Name)
	}
	name := nextControlPlaneName(c.Name, names)
	if err := mkdirAll(l.auditDir(name)); err != nil {
		return Node{}, err
	}
	args := []string{"docker", "run", "--name", name, "--hostname", name,
		"--detach", "--tty", "--net", "kind", "--restart=on-failure:1", "--init=false", "--cgroupns=private",
		"--label", clusterLabel + "=" + c.Name, "--label", roleLabel + "=control-plane",
		"--privileged", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var", "--volume", "/lib/modules:/lib/modules:ro",
		"-e", "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER", "-e", "KUBECONFIG=/etc/kubernetes/admin.conf",
		"--volume", l.auditPolicy() + ":" + auditPolicyDir + "/policy.yaml:ro",
		"--volume", l.auditDir(name) + ":" + auditLogDir,
		"--publish", fmt.Sprintf("127.0.0.1::%d/tcp", APIServerPort),
		image,
	}
	if err := run.Command(args...).Run(ctx); err != nil {
		return Node{}, fmt.Errorf("failed to start node %s: %w", name, err)
	}
	if err := waitSystemd(ctx, name); err != nil {
		return Node{}, err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	for _, n := range nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("node %s started but kind does not list it", name)
}

func waitSystemd(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last string
	for {
		out, _ := docker.Exec(ctx, name, "systemctl", "is-system-running")
		last = strings.TrimSpace(out)
		if last == "running" || last == "degraded" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("systemd in %s did not come up within 60s (last state %q)", name, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// copyFile copies path from one node to another, keeping its mode.
func copyFile(ctx context.Context, from, to Node, path string) error {
	body, err := run.Command("docker", "exec", from.Name, "cat", path).Output(ctx)
	if err != nil {
		return err
	}
	return docker.ExecInput(ctx, to.Name, strings.NewReader(string(body)), "sh", "-c",
		fmt.Sprintf("mkdir -p $(dirname %[1]s) && cat > %[1]s && chmod 0600 %[1]s", path))
}

// JoinControlPlane joins a started node to the cluster as a control plane
// with kubeadm, the way kind joins its secondary control planes: the
// cluster's certificates copied from a member, containerd configured as
// the member's, a fresh bootstrap token. kubeadm deploys the components of
// the cluster's ClusterConfiguration version (SetKubernetesVersion moves it).
func (c *Cluster) JoinControlPlane(ctx context.Context, member, node Node) error {
	if err := copyFile(ctx, member, node, "/etc/containerd/config.toml"); err != nil {
		return fmt.Errorf("failed to copy containerd config: %w", err)
	}
	if _, err := node.Run(ctx, "systemctl", "restart", "containerd"); err != nil {
		return err
	}
	for _, f := range pkiFiles {
		if err := copyFile(ctx, member, node, f); err != nil {
			return fmt.Errorf("failed to copy %s: %w", f, err)
		}
	}
	token, err := member.Run(ctx, "kubeadm", "token", "create", "--ttl", "30m", "--kubeconfig", "/etc/kubernetes/admin.conf")
	if err != nil {
		return fmt.Errorf("failed to create a bootstrap token: %w", err)
	}
	ip, err := node.Run(ctx, "sh", "-c", "getent ahostsv4 $(hostname) | awk '{print $1; exit}'")
	if err != nil || ip == "" {
		return fmt.Errorf("failed to find %s's address: %v", node.Name, err)
	}
	raw, err := node.Run(ctx, "cat", "/kind/version")
	if err != nil {
		return err
	}
	v, err := nodeimage.ParseVersion(raw)
	if err != nil {
		return err
	}
	conf := joinConfiguration(kubeadmAPIVersion(v.Minor()), c.Name, node.Name, ip, token)
	if err := docker.ExecInput(ctx, node.Name, strings.NewReader(conf), "sh", "-c", "cat > /kind/kubeadm.conf"); err != nil {
		return err
	}
	if _, err := node.Run(ctx, "kubeadm", "join", "--config", "/kind/kubeadm.conf", "--v=2"); err != nil {
		return fmt.Errorf("failed to join %s with kubeadm: %w", node.Name, err)
	}
	return nil
}

// joinConfiguration is the JoinConfiguration kind would give a secondary
// control plane, preflight skipped as kind skips it (its system checks
// refuse a cgroup v1 host outright).
func joinConfiguration(apiVersion, cluster, node, ip, token string) string {
	args := func(pairs ...string) string {
		var b strings.Builder
		for i := 0; i < len(pairs); i += 2 {
			if apiVersion == "v1beta4" {
				fmt.Fprintf(&b, "    - name: %q\n      value: %q\n", pairs[i], pairs[i+1])
			} else {
				fmt.Fprintf(&b, "    %q: %q\n", pairs[i], pairs[i+1])
			}
		}
		return b.String()
	}
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/%s
kind: JoinConfiguration
controlPlane:
  localAPIEndpoint:
    advertiseAddress: %q
    bindPort: %d
nodeRegistration:
  criSocket: unix:///run/containerd/containerd.sock
  kubeletExtraArgs:
%sdiscovery:
  bootstrapToken:
    apiServerEndpoint: %q
    token: %q
    unsafeSkipCAVerification: true
skipPhases:
- preflight
`, apiVersion, ip, APIServerPort,
		args("node-ip", ip, "provider-id", fmt.Sprintf("kind://docker/%s/%s", cluster, node), "node-labels", ""),
		fmt.Sprintf("%s-external-load-balancer:%d", cluster, APIServerPort), token)
}

// SyncLoadBalancer points kind's load balancer at exactly the current
// control planes but those named in except, rewriting the endpoints of the
// CDS kind wrote (its health checks kept) with an atomic rename, as kind does.
func (c *Cluster) SyncLoadBalancer(ctx context.Context, except ...string) error {
	lb := c.Name + "-external-load-balancer"
	all, err := c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	var cps []Node
	for _, n := range all {
		if !slices.Contains(except, n.Name) {
			cps = append(cps, n)
		}
	}
	raw, err := docker.Exec(ctx, lb, "cat", cdsPath)
	if err != nil {
		return fmt.Errorf("failed to read the load balancer's configuration: %w", err)
	}
	updated, err := setBackends(raw, cps)
	if err != nil {
		return err
	}
	return docker.ExecInput(ctx, lb, strings.NewReader(updated), "sh", "-c",
		fmt.Sprintf("cat > %[1]s.tmp && chmod 666 %[1]s.tmp && mv %[1]s.tmp %[1]s", cdsPath))
}

func setBackends(cds string, cps []Node) (string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(cds), &doc); err != nil {
		return "", fmt.Errorf("failed to parse the load balancer's CDS: %w", err)
	}
	resources, _ := doc["resources"].([]any)
	if len(resources) != 1 {
		return "", fmt.Errorf("the load balancer's CDS has %d clusters, want 1", len(resources))
	}
	names := make([]string, 0, len(cps))
	for _, n := range cps {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	var eps []any
	for _, n := range names {
		eps = append(eps, map[string]any{"endpoint": map[string]any{"address": map[string]any{
			"socket_address": map[string]any{"address": n, "port_value": APIServerPort}}}})
	}
	cluster := resources[0].(map[string]any)
	la, _ := cluster["load_assignment"].(map[string]any)
	if la == nil {
		la = map[string]any{"cluster_name": cluster["name"]}
		cluster["load_assignment"] = la
	}
	la["endpoints"] = []any{map[string]any{"lb_endpoints": eps}}
	out, err := yaml.Marshal(doc)
	return string(out), err
}

// LoadBalancerBackends lists the backends kind's load balancer is
// configured with, as host:port.
func (c *Cluster) LoadBalancerBackends(ctx context.Context) ([]string, error) {
	raw, err := docker.Exec(ctx, c.Name+"-external-load-balancer", "cat", cdsPath)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Resources []struct {
			LoadAssignment struct {
				Endpoints []struct {
					LBEndpoints []struct {
						Endpoint struct {
							Address struct {
								SocketAddress struct {
									Address   string `json:"address"`
									PortValue int    `json:"port_value"`
								} `json:"socket_address"`
							} `json:"address"`
						} `json:"endpoint"`
					} `json:"lb_endpoints"`
				} `json:"endpoints"`
			} `json:"load_assignment"`
		} `json:"resources"`
	}
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range doc.Resources {
		for _, e := range r.LoadAssignment.Endpoints {
			for _, lb := range e.LBEndpoints {
				a := lb.Endpoint.Address.SocketAddress
				out = append(out, fmt.Sprintf("%s:%d", a.Address, a.PortValue))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// LoadImageTars imports image tars into every node's containerd, pinned,
// the way the node image preloads them.
func (c *Cluster) LoadImageTars(ctx context.Context, tars ...string) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		for _, t := range tars {
			f, err := os.Open(t)
			if err != nil {
				return err
			}
			err = docker.ExecInput(ctx, n.Name, f, "ctr", "--namespace=k8s.io", "images", "import",
				"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--digests", "-")
			f.Close()
			if err != nil {
				return fmt.Errorf("failed to load %s into %s: %w", filepath.Base(t), n.Name, err)
			}
		}
	}
	return nil
}

// LoadImages copies images from the host's Docker into every node, as
// kind's load docker-image does: what a Pod runs is never pulled.
func (c *Cluster) LoadImages(ctx context.Context, refs ...string) error {
	dir, err := os.MkdirTemp("", "skewer-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var tars []string
	for i, ref := range refs {
		tar := filepath.Join(dir, fmt.Sprintf("%d.tar", i))
		if err := docker.Save(ctx, ref, tar); err != nil {
			return fmt.Errorf("failed to save %s: %w", ref, err)
		}
		tars = append(tars, tar)
	}
	return c.LoadImageTars(ctx, tars...)
}
