package rollout

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// SurgeInput says where a surge rollout goes.
type SurgeInput struct {
	// To is the version every control plane ends at.
	To version.Version
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
	// ImageTars are host tars of images, by reference, of the versions
	// the surge moves between, where they were built here. Each joiner
	// gets the images kube-proxy and CoreDNS run at the moment from them
	// (its node image holds its own version's, the addons stay at the
	// older one until the end), and a complete surge gives every node
	// To's for kubeadm's addon phase. Without one, a joiner's addon image
	// is left to its kubelet, and the addon phase copies it from a node
	// that holds it.
	ImageTars map[string]string
}

// Validate refuses input that cannot describe a surge.
func (in SurgeInput) Validate() error {
	if err := checkMove("a surge", in.To, in.PauseAfter); err != nil {
		return err
	}
	switch {
	case in.ControlPlanes < 0:
		return fmt.Errorf("%d control planes: cannot be negative", in.ControlPlanes)
	}
	return nil
}

// ErrNothingToDo is Surge's answer when every control plane runs To.
var ErrNothingToDo = errors.New("every control plane already runs the target version")

// Surge plans the replacement, one at a time, of every control plane not
// at in.To: join a new node at in.To, wait until its apiserver serves at
// in.To and the load balancer sends it traffic, then drain and remove an old
// one. Quorum holds throughout: the cluster grows to N+1 before shrinking.
func Surge(ctx context.Context, c *cluster.Cluster, in SurgeInput) ([]Action, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	old, total, err := toMove(ctx, c, in.To, in.AllowDowngrade)
	if errors.Is(err, ErrNothingToDo) && in.AllowDowngrade {
		// A rollback after an interrupted rollout whose new node was
		// discarded: only the ClusterConfiguration is left to restore.
		return []Action{setVersion(in.To)}, nil
	}
	if err != nil {
		return nil, err
	}
	// The bootstrap node (first by name) goes last: kind reads the
	// kubeconfig from it for as long as possible.
	sort.Sort(sort.Reverse(sort.StringSlice(old)))
	actions := []Action{setVersion(in.To)}
	for ; in.ControlPlanes > 0 && total > in.ControlPlanes && len(old) > 0; total-- {
		actions = append(actions, retire(old[0])...)
		old = old[1:]
	}
	complete := true
	if in.PauseAfter > 0 && in.PauseAfter < len(old) {
		old, complete = old[:in.PauseAfter], false
	}
	for _, name := range old {
		actions = append(actions, replace(name, in.To, in.ImageTars, !in.AllowDowngrade)...)
	}
	if complete && !in.AllowDowngrade {
		actions = append(actions, upgradeAddons(in.To, in.ImageTars))
	}
	return actions, nil
}

// setVersion moves the ClusterConfiguration to target: kubeadm join
// deploys that version, whatever the joining node's.
func setVersion(target version.Version) Action {
	return Do("set ClusterConfiguration kubernetesVersion to "+target.String(), func(ctx context.Context, c *cluster.Cluster) error {
		return setClusterVersion(ctx, c, target)
	})
}

// toMove validates a move of the control planes to version to and lists
// those not there yet, and how many there are in all: an HA control plane,
// no skew beyond one minor, and no downgrade unless allowed.
func toMove(ctx context.Context, c *cluster.Cluster, to version.Version, allowDowngrade bool) (old []string, total int, err error) {
	versions, err := NodeVersions(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	if len(versions) < 3 {
		return nil, 0, fmt.Errorf("cluster %q has %d control plane(s): a rolling replacement needs an HA control plane (3 or more)", c.Name, len(versions))
	}
	for name, cur := range versions {
		switch {
		case cur.Equal(to):
			continue
		case to.Less(cur) && !allowDowngrade:
			return nil, 0, fmt.Errorf("%s runs %s: %s is a downgrade (use skewer rollback)", name, cur, to)
		case cur.MinorsApart(to) > 1:
			return nil, 0, fmt.Errorf("version skew not allowed: %s runs %s, more than one minor from %s", name, cur, to)
		}
		old = append(old, name)
	}
	if len(old) == 0 {
		return nil, 0, fmt.Errorf("%w (%s)", ErrNothingToDo, to)
	}
	return old, len(versions), nil
}

// replace is the surge of one control plane; tars are the host's image
// tars the joiner's addon images come from (SurgeInput.ImageTars); an
// upgrade gives the cluster target's RBAC rules once the joiner is a
// member (kubeletAccess).
func replace(oldName string, target version.Version, tars map[string]string, upgrade bool) []Action {
	var added cluster.Node // set by the first action, read by the rest
	var proxied bool       // the joiner holds the image kube-proxy runs
	joiner := func() string { return added.Name }
	actions := []Action{
		DoOn(joiner, fmt.Sprintf("start a %s control-plane node to replace %s", target, oldName), func(ctx context.Context, c *cluster.Cluster) error {
			n, err := StartControlPlane(ctx, c, target)
			added = n
			return err
		}),
		DoOn(joiner, "join the new node with kubeadm", func(ctx context.Context, c *cluster.Cluster) error {
			member, err := joinedMember(ctx, c, added)
			if err != nil {
				return err
			}
			if err := JoinControlPlane(ctx, c, member, added); err != nil || !upgrade {
				return err
			}
			return kubeletAccess(ctx, added, target)
		}),
		// The images after the join, not before: commit 9fddee3 gave them
		// between the node's start and its join, and the import failed
		// with no message for the second joiner of a window, every try
		// (docs/decisions.md). While the node comes up, not before it: the
		// import (20-24 s a joiner under traffic, session 19) is half
		// disk, and the wait is for the node's own components.
		DoOn(joiner, "give the new node the images kube-proxy and CoreDNS run while it comes up; wait for it Ready and its apiserver at "+target.String(), func(ctx context.Context, c *cluster.Cluster) error {
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error {
				var err error
				proxied, err = giveRunningAddons(gctx, c, added, tars)
				return err
			})
			g.Go(func() error { return waitControlPlane(gctx, c, added, target) })
			if err := g.Wait(); err != nil || !proxied {
				return err
			}
			return waitNodeProxy(ctx, c, added)
		}),
		DoOn(joiner, "add the new node to the load balancer", func(ctx context.Context, c *cluster.Cluster) error {
			return syncLoadBalancer(ctx, c)
		}),
	}
	return append(actions, retire(oldName)...)
}

// kubeletAccess runs the joiner's kubeadm's bootstrap-token phase of
// upgrade apply, as `kubeadm upgrade apply` runs it after the first
// control plane is upgraded in place: the RBAC rules target's kubeadm
// expects. Since 1.36 the certificate kubeadm makes for an apiserver's
// client of the kubelets carries no group (1.35's carried
// kubeadm:cluster-admins); the ClusterRoleBinding
// kubeadm:apiserver-kubelet-client to system:kubelet-api-admin grants its
// user the kubelets' API instead. A surge never runs upgrade apply: without
// this phase every 1.36 apiserver it joins answers a Pod's log, exec or
// port-forward with 403 (rollout.kubelet-access). Before the joiner
// enters the load balancer, so no client meets it without.
func kubeletAccess(ctx context.Context, joiner cluster.Node, target version.Version) error {
	if _, err := joiner.Run(ctx, "kubeadm", "upgrade", "apply", "phase", "bootstrap-token", target.String(), "--kubeconfig", "/etc/kubernetes/admin.conf"); err != nil {
		return fmt.Errorf("kubeadm's bootstrap-token phase on %s: %w", joiner.Name, err)
	}
	return nil
}

// joinedMember is a control plane other than joining to copy the cluster's
// certificates from: the bootstrap one while it is there.
func joinedMember(ctx context.Context, c *cluster.Cluster, joining cluster.Node) (cluster.Node, error) {
	member, err := c.BootstrapControlPlane(ctx)
	if err != nil {
		return cluster.Node{}, err
	}
	if member.Name != joining.Name {
		return member, nil
	}
	others, err := c.SecondaryControlPlanes(ctx)
	if err != nil {
		return cluster.Node{}, err
	}
	for _, n := range others {
		if n.Name != joining.Name {
			return n, nil
		}
	}
	return cluster.Node{}, fmt.Errorf("no control plane besides %s to join it from", joining.Name)
}

// retire drains and removes a control plane and checks what is left.
func retire(name string) []Action {
	return []Action{
		DoOn(on(name), "drain "+name, func(ctx context.Context, c *cluster.Cluster) error {
			return drain(ctx, c, name)
		}),
		DoOn(on(name), "remove "+name+" (etcd member, identity lease, Node, container, load balancer backend)", func(ctx context.Context, c *cluster.Cluster) error {
			n, err := c.Node(ctx, name)
			if err != nil {
				return err
			}
			return removeControlPlane(ctx, c, n)
		}),
		Do("check etcd members, identity leases and load balancer backends equal the control planes", func(ctx context.Context, c *cluster.Cluster) error {
			return CheckMembership(ctx, c)
		}),
	}
}

// waitControlPlane waits until node's apiserver answers /version with
// want and is ready, and its Node is Ready with its kubelet at want; it
// says which condition it last saw unmet when it gives up.
func waitControlPlane(ctx context.Context, c *cluster.Cluster, node cluster.Node, want version.Version) error {
	return wait.For(ctx, "rollout/control-plane-ready", fmt.Sprintf("%s Ready at %s", node.Name, want),
		func(ctx context.Context) (bool, string, error) {
			ok, seen := controlPlaneReady(ctx, c, node, want)
			return ok, seen, nil
		})
}

func controlPlaneReady(ctx context.Context, c *cluster.Cluster, node cluster.Node, want version.Version) (bool, string) {
	cs, err := c.APIServerClient(ctx, node)
	if err != nil {
		return false, err.Error()
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return false, "its apiserver: " + err.Error()
	}
	if v.GitVersion != want.String() {
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
	return kubeletReady(n, want)
}

// kubeletReady says whether n's kubelet reports want and n is Ready, and
// if not, what it saw.
func kubeletReady(n *corev1.Node, want version.Version) (bool, string) {
	if kv := n.Status.NodeInfo.KubeletVersion; kv != want.String() {
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
