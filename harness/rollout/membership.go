package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
)

// Where kind's load balancer reads its backends.
const cdsPath = "/home/envoy/cds.yaml"

// What the cluster keeps of its control planes besides the nodes: the
// members of etcd, the apiserver identity leases, the load balancer's
// backends. A surge keeps all of them equal to the control-plane nodes.

// syncLoadBalancer points kind's load balancer at exactly the current
// control planes but those named in except, rewriting the endpoints of the
// CDS kind wrote (its health checks kept) with an atomic rename, as kind does.
func syncLoadBalancer(ctx context.Context, c *cluster.Cluster, except ...string) error {
	lb, err := c.LoadBalancer(ctx)
	if err != nil {
		return err
	}
	all, err := c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	var cps []string
	for _, n := range all {
		if !slices.Contains(except, n.Name) {
			cps = append(cps, n.Name)
		}
	}
	raw, err := lb.ReadFile(ctx, cdsPath)
	if err != nil {
		return fmt.Errorf("failed to read the load balancer's configuration: %w", err)
	}
	updated, err := setBackends(raw, cps)
	if err != nil {
		return err
	}
	return lb.WriteFile(ctx, cdsPath, updated, 0o666)
}

func setBackends(cds []byte, names []string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(cds, &doc); err != nil {
		return nil, fmt.Errorf("failed to parse the load balancer's CDS: %w", err)
	}
	resources, _ := doc["resources"].([]any)
	if len(resources) != 1 {
		return nil, fmt.Errorf("the load balancer's CDS has %d clusters, want 1", len(resources))
	}
	cds0, ok := resources[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the load balancer's CDS cluster is a %T, want a mapping", resources[0])
	}
	names = slices.Sorted(slices.Values(names))
	var eps []any
	for _, n := range names {
		eps = append(eps, map[string]any{"endpoint": map[string]any{"address": map[string]any{
			"socket_address": map[string]any{"address": n, "port_value": cluster.APIServerPort}}}})
	}
	la, _ := cds0["load_assignment"].(map[string]any)
	if la == nil {
		la = map[string]any{"cluster_name": cds0["name"]}
		cds0["load_assignment"] = la
	}
	la["endpoints"] = []any{map[string]any{"lb_endpoints": eps}}
	return yaml.Marshal(doc)
}

// loadBalancerBackends lists the backends kind's load balancer is
// configured with, as host:port.
func loadBalancerBackends(ctx context.Context, c *cluster.Cluster) ([]string, error) {
	lb, err := c.LoadBalancer(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := lb.ReadFile(ctx, cdsPath)
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
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("failed to parse the load balancer's CDS: %w", err)
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

// apiServerIdentities lists the hostnames holding an apiserver identity
// lease: the peers a Mixed Version Proxy can route to.
func apiServerIdentities(ctx context.Context, c *cluster.Cluster) ([]string, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	leases, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
	if err != nil {
		return nil, fmt.Errorf("failed to list apiserver identity leases: %w", err)
	}
	var out []string
	for _, l := range leases.Items {
		out = append(out, l.Labels["kubernetes.io/hostname"])
	}
	sort.Strings(out)
	return out, nil
}

type etcdMember struct {
	ID   uint64 `json:"ID"`
	Name string `json:"name"`
}

// Etcdctl runs etcdctl with args in via's etcd container, as that member.
func Etcdctl(ctx context.Context, via cluster.Node, args ...string) (string, error) {
	out, err := via.Run(ctx, "crictl", "ps", "-q", "--name", "^etcd$")
	if err != nil {
		return "", fmt.Errorf("failed to find etcd in %s: %w", via.Name, err)
	}
	id, _, _ := strings.Cut(out, "\n")
	if id == "" {
		return "", fmt.Errorf("no etcd container runs in %s", via.Name)
	}
	argv := append([]string{"crictl", "exec", id, "etcdctl",
		"--endpoints=https://127.0.0.1:2379", "--cacert=/etc/kubernetes/pki/etcd/ca.crt",
		"--cert=/etc/kubernetes/pki/etcd/server.crt", "--key=/etc/kubernetes/pki/etcd/server.key"}, args...)
	return via.Run(ctx, argv...)
}

func etcdMemberList(ctx context.Context, via cluster.Node) ([]etcdMember, error) {
	out, err := Etcdctl(ctx, via, "member", "list", "-w", "json")
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

// etcdMembers lists the names of etcd's members, asked of via's etcd. A
// member added but not started yet has no name: it is listed as "".
func etcdMembers(ctx context.Context, via cluster.Node) ([]string, error) {
	list, err := etcdMemberList(ctx, via)
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

// CheckMembership compares etcd's members, the apiserver identity leases
// and the load balancer's backends with the control-plane nodes.
func CheckMembership(ctx context.Context, c *cluster.Cluster) error {
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	if len(cps) == 0 {
		return fmt.Errorf("cluster %q has no control plane", c.Name)
	}
	var names, backends []string
	for _, n := range cps {
		names = append(names, n.Name)
		backends = append(backends, fmt.Sprintf("%s:%d", n.Name, cluster.APIServerPort))
	}
	sort.Strings(backends) // "x-control-plane2:6443" sorts before "x-control-plane:6443"
	members, err := etcdMembers(ctx, cps[0])
	if err != nil {
		return err
	}
	leases, err := apiServerIdentities(ctx, c)
	if err != nil {
		return err
	}
	lb, err := loadBalancerBackends(ctx, c)
	if err != nil {
		return err
	}
	return MembershipDiff(names, backends, members, leases, lb)
}

// MembershipDiff says how etcd's members, the apiserver identity leases
// and the load balancer's backends (lb) differ from the control planes
// (names, and backends: their apiserver addresses), each list sorted.
func MembershipDiff(names, backends, members, leases, lb []string) error {
	var diffs []string
	for _, d := range []struct {
		what      string
		got, want []string
	}{
		{"etcd members", members, names},
		{"apiserver identity leases", leases, names},
		{"load balancer backends", lb, backends},
	} {
		if !slices.Equal(d.got, d.want) {
			diffs = append(diffs, fmt.Sprintf("%s are %v", d.what, d.got))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("control planes are %v but %s", names, strings.Join(diffs, "; "))
	}
	return nil
}

// The version in the cluster's ClusterConfiguration is the version `kubeadm
// join --control-plane` deploys, whatever the joiner's: a surge moves it
// before it joins the first node.

// ClusterVersion is the version in the cluster's ClusterConfiguration.
func ClusterVersion(ctx context.Context, c *cluster.Cluster) (version.Version, error) {
	cfg, _, err := clusterConfiguration(ctx, c)
	if err != nil {
		return version.Version{}, err
	}
	s, _ := cfg["kubernetesVersion"].(string)
	v, err := version.Parse(s)
	if err != nil {
		return version.Version{}, fmt.Errorf("ClusterConfiguration's kubernetesVersion: %w", err)
	}
	return v, nil
}

// setClusterVersion moves the cluster's ClusterConfiguration to v, the
// proxy's gate with it (setProxyGate).
func setClusterVersion(ctx context.Context, c *cluster.Cluster, v version.Version) error {
	cfg, save, err := clusterConfiguration(ctx, c)
	if err != nil {
		return err
	}
	gate := setGates(cfg, v, c.VersionFeatureGates())
	if old, _ := cfg["kubernetesVersion"].(string); old == v.String() && !gate {
		return nil
	}
	cfg["kubernetesVersion"] = v.String()
	return save(cfg)
}

// clusterConfiguration reads kubeadm's ClusterConfiguration and returns a
// function that writes a changed one back.
func clusterConfiguration(ctx context.Context, c *cluster.Cluster) (map[string]any, func(map[string]any) error, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, nil, err
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read kubeadm-config: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cfg); err != nil {
		return nil, nil, fmt.Errorf("failed to parse ClusterConfiguration: %w", err)
	}
	save := func(cfg map[string]any) error {
		out, err := yaml.Marshal(cfg)
		if err != nil {
			return err
		}
		cm.Data["ClusterConfiguration"] = string(out)
		if _, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("failed to update kubeadm-config: %w", err)
		}
		return nil
	}
	return cfg, save, nil
}
