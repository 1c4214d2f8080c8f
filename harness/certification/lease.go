package certification

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// decoy is where a forged identity Lease says its apiserver is: an
// address of TEST-NET-1 (RFC 5737), which nothing on this machine has, so
// any packet the entry server sends there was sent because of the Lease.
const decoy = "192.0.2.10"

const peerDiscoverySyncErrors = "apiserver_peer_discovery_sync_errors_total"

// CheckForgedLease judges proxy.trust.forged-lease: a user allowed to write
// Leases in kube-system forges an apiserver identity Lease (the identity
// label, a name no server has, its peer-advertise-address annotation
// pointing at decoy). Through the first older apiserver, the window's
// resource must then be served as before - every request 200, each one's
// audit event at a real newer apiserver - and not one packet may leave the
// entry server's node for the decoy (an iptables rule there counts them).
// The Lease is deleted before it returns; a 1.36+ entry server's
// peer-discovery sync errors are measured, as the forged peer's address
// cannot be resolved.
func CheckForgedLease(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.trust.forged-lease"
	old := w.Old[0]
	if _, err := w.RouteWorks(ctx, "default"); err != nil {
		return fail(id, "%v", err)
	}
	node, err := c.Node(ctx, old.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	cs, err := c.Client()
	if err != nil {
		return fail(id, "%v", err)
	}
	count := []string{"OUTPUT", "-d", decoy, "-p", "tcp"} // no target: it only counts
	if _, err := node.Run(ctx, append([]string{"iptables", "-I"}, count...)...); err != nil {
		return fail(id, "a rule counting packets to %s in %s: %v", decoy, node.Name, err)
	}
	defer node.Run(context.WithoutCancel(ctx), append([]string{"iptables", "-D"}, count...)...)

	lease := forgedLease()
	name := lease.Name
	before, err := scrape(ctx, old)
	if err != nil {
		return fail(id, "%v", err)
	}
	leases := cs.CoordinationV1().Leases("kube-system")
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		return fail(id, "forge the Lease %s: %v", name, err)
	}
	defer leases.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})

	ids := &auditIDs{}
	api, err := w.api(old, "default", ids)
	if err != nil {
		return fail(id, "%v", err)
	}
	var bad []string
	n := 0
	start := time.Now()
	_ = wait.Sample(ctx, 10*time.Second, 500*time.Millisecond, func() bool {
		n++
		t0 := time.Now()
		if _, err := api.List(ctx, metav1.ListOptions{Limit: 1}); err != nil || time.Since(t0) > answerBound {
			bad = append(bad, fmt.Sprintf("list %s through %s after %s: %v in %s", w.Resource.Key(), old.Name, t0.Sub(start).Round(100*time.Millisecond), orOK(err), time.Since(t0).Round(10*time.Millisecond)))
		}
		return true
	}) // cut short, the lists made are judged: a cancelled run's verdict is an interrupt's
	after, serr := scrape(ctx, old)
	where, err := servedAt(ctx, c, w.New, ids.all())
	if err != nil {
		bad = append(bad, err.Error())
	}
	packets, perr := countedPackets(ctx, node, decoy)
	var syncErrors []string
	if serr == nil {
		syncErrors = syncErrorsMoved(before, after, old.Name)
	}
	return forgedLeaseVerdict(forgedLeaseSeen{lease: name, entry: old.Name, node: node.Name, lists: n, bad: bad, where: where, packets: packets, packetsErr: perr}, syncErrors...)
}

// forgedLease is an apiserver identity Lease no apiserver holds, its
// peer address the decoy's: what anyone allowed to write Leases in
// kube-system can forge.
func forgedLease() *coordinationv1.Lease {
	name := fmt.Sprintf("kube-apiserver-skewer-forged-%x", time.Now().UnixNano()&0xffffff)
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system",
			Labels:      map[string]string{"apiserver.kubernetes.io/identity": "kube-apiserver", "kubernetes.io/hostname": "skewer-forged"},
			Annotations: map[string]string{corev1.AnnotationPeerAdvertiseAddress: fmt.Sprintf("%s:%d", decoy, cluster.APIServerPort)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: ptr(int32(3600)), AcquireTime: &now, RenewTime: &now},
	}
}

// syncErrorsMoved says by how much entry's peer discovery sync errors of
// hostport resolution moved between its scrapes before and after: the
// forged peer's address never resolving, where the version exports it.
func syncErrorsMoved(before, after metrics.Snapshot, entry string) []string {
	moved, err := metrics.Delta(before, after, peerDiscoverySyncErrors, map[string]string{"type": "hostport_resolution"})
	switch {
	case err == nil:
		return []string{fmt.Sprintf("%s{type=hostport_resolution} on %s moved by %g: the forged peer's address never resolved", peerDiscoverySyncErrors, entry, moved)}
	case errors.Is(err, metrics.ErrNotExported):
		return nil
	}
	return []string{err.Error()}
}

// forgedLeaseSeen is what the forged-lease check saw: the forged Lease's
// name, the lists through entry (how many, those that failed or hung,
// the servers that logged them) and the packets that left node for the
// decoy, or why they could not be counted.
type forgedLeaseSeen struct {
	lease, entry, node string
	lists              int
	bad, where         []string
	packets            int
	packetsErr         error
}

// forgedLeaseVerdict judges proxy.trust.forged-lease on what was seen; more
// is evidence (the entry's peer-discovery sync errors).
func forgedLeaseVerdict(in forgedLeaseSeen, more ...string) promise.Verdict {
	const id = "proxy.trust.forged-lease"
	if v := underFault(id, "lists through "+in.entry+" with the Lease forged", in.lists); v != nil {
		return *v
	}
	bad := in.bad
	switch {
	case in.packetsErr != nil:
		bad = append(bad, in.packetsErr.Error())
	case in.packets > 0:
		bad = append(bad, fmt.Sprintf("%d packet(s) left %s for the address the forged Lease names (%s)", in.packets, in.node, decoy))
	}
	ev := append([]string{fmt.Sprintf("Lease kube-system/%s forged (identity label, peer-advertise-address %s:%d): %d lists through %s in 10 s, served by %v; %d packets to %s",
		in.lease, decoy, cluster.APIServerPort, in.lists, in.entry, tally(in.where), in.packets, decoy)}, more...)
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev,
			Reason: fmt.Sprintf("with a forged identity Lease in kube-system: %s", strings.Join(bad[:min(3, len(bad))], "; "))}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

// tally counts names: "a x3, b x2".
func tally(names []string) string {
	n := map[string]int{}
	var order []string
	for _, s := range names {
		if n[s] == 0 {
			order = append(order, s)
		}
		n[s]++
	}
	var out []string
	for _, s := range order {
		out = append(out, fmt.Sprintf("%s x%d", s, n[s]))
	}
	return strings.Join(out, ", ")
}

// countedPackets reads the packet counter of node's OUTPUT rule for dst.
func countedPackets(ctx context.Context, node cluster.Node, dst string) (int, error) {
	out, err := node.Run(ctx, "iptables", "-L", "OUTPUT", "-v", "-n", "-x")
	if err != nil {
		return 0, fmt.Errorf("iptables counters in %s: %w", node.Name, err)
	}
	n, err := packetsTo(out, dst)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", node.Name, err)
	}
	return n, nil
}

// packetsTo reads, from `iptables -L -v -n -x`, the packet count of the
// rule without a target whose destination is dst.
func packetsTo(out, dst string) (int, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// pkts bytes target prot opt in out source destination: no
		// target, so the destination is the 8th field.
		if len(f) >= 8 && f[len(f)-1] == dst {
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("no rule counting packets to %s:\n%s", dst, out)
}

func ptr[T any](v T) *T { return &v }
