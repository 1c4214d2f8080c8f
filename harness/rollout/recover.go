package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// Member is one control plane as its own apiserver reports it.
type Member struct {
	Name string
	// Version is what the node's apiserver answers on /version; zero when
	// it does not answer.
	Version version.Version
	// Err says why the apiserver did not answer.
	Err error
	// Joined says kubeadm finished joining the node: its Node carries the
	// control-plane role, which kubeadm's last join phase sets.
	Joined bool
}

// Complete says the node is a whole control plane.
func (m Member) Complete() bool { return m.Err == nil && m.Joined }

// Census asks every control-plane container's apiserver for its version
// (askVersion): a node whose join was cut short is listed, with the reason
// it does not answer, rather than failing the whole census.
func Census(ctx context.Context, c *cluster.Cluster) ([]Member, error) {
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return nil, err
	}
	joined, err := Joined(ctx, c)
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(cps))
	for _, n := range cps {
		m := Member{Name: n.Name, Joined: joined[n.Name]}
		m.Version, m.Err = askVersion(ctx, c, n)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Joined are the nodes kubeadm finished joining as control planes: their
// Node carries the control-plane role, which kubeadm's last join phase
// sets, and a removal deletes.
func Joined(ctx context.Context, c *cluster.Cluster) (map[string]bool, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		return nil, fmt.Errorf("failed to list control-plane Nodes: %w", err)
	}
	joined := map[string]bool{}
	for _, n := range nodes.Items {
		joined[n.Name] = true
	}
	return joined, nil
}

// askVersion asks node's own apiserver for its version, for as long as
// "rollout/apiserver-version" allows: an apiserver that has just restarted
// (a kubelet replaced in place restarts its static Pods) answers 403 to
// everyone until its authorizer has synced, and one that is starting
// refuses connections. When it never answers, the error is its last one.
// A node with no kube-apiserver manifest runs none and is not waited for:
// a join cut short before kubeadm wrote it (30 s of a census, twice in
// rollout.interrupted-recovers, session 21).
func askVersion(ctx context.Context, c *cluster.Cluster, node cluster.Node) (version.Version, error) {
	// A node that cannot be asked (stopped, say) is waited for as before.
	if out, err := node.Run(ctx, "sh", "-c", `if test -e "$1"; then echo present; fi`, "sh", apiserverManifest); err == nil && out != "present" {
		return version.Version{}, fmt.Errorf("no %s in %s: no apiserver to ask", apiserverManifest, node.Name)
	}
	cs, err := c.APIServerClient(ctx, node)
	if err != nil {
		return version.Version{}, err
	}
	var got version.Version
	var last error
	err = wait.For(ctx, "rollout/apiserver-version", node.Name+"'s apiserver answering /version", func(ctx context.Context) (bool, string, error) {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		v, err := ServerVersion(actx, cs)
		if err != nil {
			// A request the budget cut short says nothing of the apiserver.
			if ctx.Err() == nil {
				last = err
			}
			return false, err.Error(), nil
		}
		got = v
		return true, "", nil
	})
	if err != nil && last != nil && ctx.Err() == nil {
		return version.Version{}, last
	}
	return got, err
}

// ServerVersion asks the apiserver cs talks to for its version, once.
func ServerVersion(ctx context.Context, cs kubernetes.Interface) (version.Version, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return version.Version{}, err
	}
	return gitVersion(raw)
}

// NodeVersions maps each control plane to the version its own apiserver
// reports, and fails if any does not answer.
func NodeVersions(ctx context.Context, c *cluster.Cluster) (map[string]version.Version, error) {
	members, err := Census(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string]version.Version{}
	for _, m := range members {
		if m.Err != nil {
			return nil, fmt.Errorf("the apiserver of %s does not answer /version (a rollout cut short? `skewer rollback` recovers): %w", m.Name, m.Err)
		}
		if !m.Joined {
			return nil, fmt.Errorf("%s has not finished joining (no control-plane Node; a rollout cut short? `skewer rollback` recovers)", m.Name)
		}
		out[m.Name] = m.Version
	}
	return out, nil
}

// Recover undoes what an interrupted rollout left half done, before a
// rollback plans its moves: a kubeadm still running in a node (a cancelled
// `docker exec` leaves it running) is stopped; control planes that are not
// whole - their apiserver does not answer, or kubeadm never marked their
// Node a control plane - are discarded; etcd members without a node are
// removed; control planes a drain left cordoned are uncordoned. Each action
// reads the cluster when it runs, so Recover changes nothing on a cluster
// with nothing half done.
func Recover() []Action {
	return []Action{
		Do("stop any kubeadm a cut-short rollout left running", stopKubeadms),
		Do("discard control planes that are not whole", discardUnwhole),
		Do("remove etcd members that no control plane carries", func(ctx context.Context, c *cluster.Cluster) error {
			cps, err := c.ControlPlanes(ctx)
			if err != nil {
				return err
			}
			if len(cps) == 0 {
				return fmt.Errorf("no control plane left")
			}
			return pruneEtcdMembers(ctx, c, cps[0])
		}),
		Do("uncordon control planes a drain left cordoned", func(ctx context.Context, c *cluster.Cluster) error {
			cps, err := c.ControlPlanes(ctx)
			if err != nil {
				return err
			}
			for _, n := range cps {
				if err := uncordon(ctx, c, n.Name); err != nil {
					return err
				}
			}
			return nil
		}),
	}
}

// stopKubeadms kills a kubeadm still running in any control plane: a
// cancelled `docker exec` leaves it running.
func stopKubeadms(ctx context.Context, c *cluster.Cluster) error {
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	for _, n := range cps {
		_, _ = n.Run(ctx, "pkill", "-9", "-x", "kubeadm") // exits 1 when there is none
	}
	return nil
}

// discardUnwhole takes out every control plane that is not whole, so long
// as one is.
func discardUnwhole(ctx context.Context, c *cluster.Cluster) error {
	members, err := Census(ctx, c)
	if err != nil {
		return err
	}
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(members, Member.Complete) {
		return fmt.Errorf("no control plane is whole: nothing to recover from")
	}
	for _, m := range members {
		if m.Complete() {
			continue
		}
		for _, n := range cps {
			if n.Name == m.Name {
				if err := discardControlPlane(ctx, c, n); err != nil {
					return fmt.Errorf("failed to discard %s: %w", n.Name, err)
				}
			}
		}
	}
	return nil
}

// Describe is one line per control plane: its version, or why it does not
// answer.
func Describe(members []Member) string {
	var b strings.Builder
	for _, m := range members {
		switch {
		case m.Err != nil:
			fmt.Fprintf(&b, "  %-40s does not answer: %v\n", m.Name, m.Err)
		case !m.Joined:
			fmt.Fprintf(&b, "  %-40s %s, join not finished (no control-plane Node)\n", m.Name, m.Version)
		default:
			fmt.Fprintf(&b, "  %-40s %s\n", m.Name, m.Version)
		}
	}
	return b.String()
}

func gitVersion(raw []byte) (version.Version, error) {
	var info apiversion.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return version.Version{}, fmt.Errorf("not a /version answer %q: %w", raw, err)
	}
	return version.Parse(info.GitVersion)
}
