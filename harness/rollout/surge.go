package rollout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
)

// SurgeInput says where a surge rollout goes.
type SurgeInput struct {
	// To is the version every control plane ends at.
	To string
	// PauseAfter stops after this many control planes were replaced (0: all),
	// holding the cluster in the mixed window.
	PauseAfter int
	// AllowDowngrade permits To to be one minor older: that is a rollback.
	AllowDowngrade bool
	// ControlPlanes is how many control planes the cluster ends with (0:
	// as many as now). A rollback of a rollout interrupted after a join
	// finds one more than it began with: the surplus not at To is drained
	// and removed rather than replaced.
	ControlPlanes int
}

// ErrNothingToDo is Surge's answer when every control plane runs To.
var ErrNothingToDo = errors.New("every control plane already runs the target version")

// Surge plans the replacement, one at a time, of every control plane not
// at in.To: join a new node at in.To, wait until its apiserver serves at
// in.To and the load balancer sends it traffic, then drain and remove an old
// one. Quorum holds throughout: the cluster grows to N+1 before shrinking.
func Surge(ctx context.Context, c *cluster.Cluster, in SurgeInput) ([]Action, error) {
	old, total, target, err := toMove(ctx, c, in.To, in.AllowDowngrade)
	if errors.Is(err, ErrNothingToDo) && in.AllowDowngrade {
		// A rollback after an interrupted rollout whose new node was
		// discarded: only the ClusterConfiguration is left to restore.
		return []Action{setVersion(target)}, nil
	}
	if err != nil {
		return nil, err
	}
	// The bootstrap node (first by name) goes last: kind reads the
	// kubeconfig from it for as long as possible.
	sort.Sort(sort.Reverse(sort.StringSlice(old)))
	actions := []Action{setVersion(target)}
	for ; in.ControlPlanes > 0 && total > in.ControlPlanes && len(old) > 0; total-- {
		actions = append(actions, retire(old[0])...)
		old = old[1:]
	}
	if in.PauseAfter > 0 && in.PauseAfter < len(old) {
		old = old[:in.PauseAfter]
	}
	for _, name := range old {
		actions = append(actions, replace(name, target)...)
	}
	return actions, nil
}

// setVersion moves the ClusterConfiguration to target: kubeadm join
// deploys that version, whatever the joining node's.
func setVersion(target string) Action {
	return Do("set ClusterConfiguration kubernetesVersion to "+target, func(ctx context.Context, c *cluster.Cluster) error {
		_, err := c.SetKubernetesVersion(ctx, target)
		return err
	})
}

// toMove validates a move of the control planes to version and lists
// those not there yet, and how many there are in all: an HA control plane,
// no skew beyond one minor, and no downgrade unless allowed.
func toMove(ctx context.Context, c *cluster.Cluster, version string, allowDowngrade bool) (old []string, total int, target string, err error) {
	to, err := nodeimage.ParseVersion(version)
	if err != nil {
		return nil, 0, "", err
	}
	target = "v" + to.String()
	versions, err := NodeVersions(ctx, c)
	if err != nil {
		return nil, 0, "", err
	}
	if len(versions) < 3 {
		return nil, 0, "", fmt.Errorf("cluster %q has %d control plane(s): a rolling replacement needs an HA control plane (3 or more)", c.Name, len(versions))
	}
	for name, v := range versions {
		cur, err := nodeimage.ParseVersion(v)
		if err != nil {
			return nil, 0, "", fmt.Errorf("%s runs %q: %w", name, v, err)
		}
		switch {
		case cur.EqualTo(to):
			continue
		case to.LessThan(cur) && !allowDowngrade:
			return nil, 0, "", fmt.Errorf("%s runs %s: %s is a downgrade (use skewer rollback)", name, v, target)
		case cur.Major() != to.Major() || (to.Minor() > cur.Minor()+1) || (cur.Minor() > to.Minor()+1):
			return nil, 0, "", fmt.Errorf("version skew not allowed: %s runs %s, more than one minor from %s", name, v, target)
		}
		old = append(old, name)
	}
	if len(old) == 0 {
		return nil, 0, target, fmt.Errorf("%w (%s)", ErrNothingToDo, target)
	}
	return old, len(versions), target, nil
}

// replace is the surge of one control plane.
func replace(oldName, target string) []Action {
	var added cluster.Node // set by the first action, read by the rest
	actions := []Action{
		Do(fmt.Sprintf("start a %s control-plane node to replace %s", target, oldName), func(ctx context.Context, c *cluster.Cluster) error {
			n, err := c.StartControlPlaneNode(ctx, target)
			added = n
			return err
		}),
		Do("join the new node with kubeadm", func(ctx context.Context, c *cluster.Cluster) error {
			member, err := c.BootstrapControlPlane(ctx)
			if err != nil {
				return err
			}
			if member.Name == added.Name {
				cps, _ := c.SecondaryControlPlanes(ctx)
				member = cps[0]
			}
			return c.JoinControlPlane(ctx, member, added)
		}),
		Do("wait for the new node Ready and its apiserver at "+target, func(ctx context.Context, c *cluster.Cluster) error {
			return waitControlPlane(ctx, c, added, target)
		}),
		Do("add the new node to the load balancer", func(ctx context.Context, c *cluster.Cluster) error {
			return c.SyncLoadBalancer(ctx)
		}),
	}
	return append(actions, retire(oldName)...)
}

// retire drains and removes a control plane and checks what is left.
func retire(name string) []Action {
	return []Action{
		Do("drain "+name, func(ctx context.Context, c *cluster.Cluster) error {
			return c.Drain(ctx, name)
		}),
		Do("remove "+name+" (etcd member, identity lease, Node, container, load balancer backend)", func(ctx context.Context, c *cluster.Cluster) error {
			n, err := nodeByName(ctx, c, name)
			if err != nil {
				return err
			}
			return c.RemoveControlPlane(ctx, n)
		}),
		Do("check etcd members, identity leases and load balancer backends equal the control planes", func(ctx context.Context, c *cluster.Cluster) error {
			return CheckMembership(ctx, c)
		}),
	}
}

func nodeByName(ctx context.Context, c *cluster.Cluster, name string) (cluster.Node, error) {
	all, err := c.Nodes(ctx)
	if err != nil {
		return cluster.Node{}, err
	}
	for _, n := range all {
		if n.Name == name {
			return n, nil
		}
	}
	return cluster.Node{}, fmt.Errorf("no node %s in cluster %s", name, c.Name)
}

// waitControlPlane waits until node's apiserver answers /version with
// version and is ready, and its Node is Ready with its kubelet at
// version; it says which condition it last saw unmet when it gives up.
func waitControlPlane(ctx context.Context, c *cluster.Cluster, node cluster.Node, version string) error {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	last := "nothing observed yet"
	for {
		if ok, seen := controlPlaneReady(ctx, c, node, version); ok {
			return nil
		} else {
			last = seen
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s within 4m: %s", node.Name, version, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func controlPlaneReady(ctx context.Context, c *cluster.Cluster, node cluster.Node, version string) (bool, string) {
	cs, err := c.APIServerClient(ctx, node)
	if err != nil {
		return false, err.Error()
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return false, "its apiserver: " + err.Error()
	}
	if v.GitVersion != version {
		return false, "its apiserver reports " + v.GitVersion
	}
	if err := cluster.Readyz(ctx, cs); err != nil {
		return false, "its apiserver: " + err.Error()
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		return false, "its Node: " + err.Error()
	}
	// The kubelet at the version too: one replaced in place reports it
	// once it has restarted and synced the node's status.
	if kv := n.Status.NodeInfo.KubeletVersion; kv != version {
		return false, "its kubelet reports " + kv
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return true, ""
			}
			return false, fmt.Sprintf("Node Ready=%s (%s)", cond.Status, cond.Message)
		}
	}
	return false, "Node has no Ready condition"
}

// CheckMembership compares etcd's members, the apiserver identity leases
// and the load balancer's backends with the control-plane nodes.
func CheckMembership(ctx context.Context, c *cluster.Cluster) error {
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	var names, backends []string
	for _, n := range cps {
		names = append(names, n.Name)
		backends = append(backends, fmt.Sprintf("%s:%d", n.Name, cluster.APIServerPort))
	}
	sort.Strings(names)
	sort.Strings(backends)
	members, err := c.EtcdMembers(ctx, cps[0])
	if err != nil {
		return err
	}
	leases, err := c.APIServerIdentities(ctx)
	if err != nil {
		return err
	}
	lb, err := c.LoadBalancerBackends(ctx)
	if err != nil {
		return err
	}
	var diffs []string
	for what, got := range map[string][]string{"etcd members": members, "apiserver identity leases": leases} {
		if strings.Join(got, ",") != strings.Join(names, ",") {
			diffs = append(diffs, fmt.Sprintf("%s are %v", what, got))
		}
	}
	if strings.Join(lb, ",") != strings.Join(backends, ",") {
		diffs = append(diffs, fmt.Sprintf("load balancer backends are %v", lb))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("control planes are %v but %s", names, strings.Join(diffs, "; "))
	}
	return nil
}
