package certification

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// CauseNoCapablePeer is why an older apiserver answers 404 for a resource
// only a stopped peer served: with no peer left holding an identity Lease
// that serves it, the proxy lets the request fall through to the local
// handler, which does not serve it.
const CauseNoCapablePeer = "no-capable-peer"

// leaseGone waits, within its budget, for the identity Lease id to be
// gone, and says from when it was seen gone (zero if it never went) and
// what was seen.
func leaseGone(ctx context.Context, c *cluster.Cluster, id string) (time.Time, string) {
	cs, err := c.Client()
	if err != nil {
		return time.Time{}, err.Error()
	}
	var at time.Time
	err = wait.For(ctx, "certify/lease-gone", "the identity Lease "+id+" to go", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, id, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			at = time.Now()
			return true, "gone", nil
		case err != nil:
			return false, err.Error(), nil
		}
		return false, "still held", nil
	})
	if err != nil {
		return time.Time{}, err.Error()
	}
	return at, fmt.Sprintf("the identity Lease %s was gone from %s on", id, at.Format("15:04:05.000"))
}

// CheckOnlyPeerGone judges proxy.fault.only-peer-gone in a window with one
// newer apiserver: it is stopped cleanly (its identity Lease goes with
// it) and the resource only it serves is asked for through the first
// older one every second for 30 s: each answer comes within the client's
// 35 s (no hang), none is served (nothing left serves it), and none is a
// 404. A 404 is put down to CauseNoCapablePeer only when answered after
// the peer's identity Lease was seen gone, and the Lease was still gone
// when the probing ended. The apiserver is started again before it
// returns.
func CheckOnlyPeerGone(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.fault.only-peer-gone"
	const d, timeout = 30 * time.Second, 35 * time.Second
	if len(w.New) != 1 {
		return promise.Errored(id, "the check needs a window with one newer apiserver; this one has %d", len(w.New))
	}
	old, gone := w.Old[0], w.New[0]
	node, err := c.Node(ctx, gone.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	peerID, err := identityLease(ctx, c, gone.Name)
	if err != nil {
		return promise.Errored(id, "%v", err)
	}
	f := &faults.StopAPIServer{Node: node}
	var as []Attempt
	var goneAt time.Time
	var leaseSeen string
	if err := withFault(ctx, c, w, f, func() error {
		// The cause of a 404 is found, not assumed: the stopped peer's
		// identity Lease must be gone before it and still gone after.
		goneAt, leaseSeen = leaseGone(ctx, c, peerID)
		var err error
		as, err = w.Probe(ctx, old, d, time.Second, timeout)
		if gone, _ := leaseGone(ctx, c, peerID); gone.IsZero() {
			goneAt, leaseSeen = time.Time{}, fmt.Sprintf("the identity Lease %s was back before the probing ended", peerID)
		}
		return err
	}); err != nil {
		return fail(id, "%v", err)
	}
	ev := []string{fmt.Sprintf("%s: %s through %s every second for %s: %v; %s", f.Name(), w.Resource.Key(), old.Name, d, Codes(as), strings.Join(messages(as), ", ")), leaseSeen}
	return onlyGoneVerdict(old.Name, gone.Name, as, timeout, goneAt, ev)
}

// onlyGoneVerdict judges proxy.fault.only-peer-gone on the attempts made
// through entry, each given timeout, with its only capable peer gone
// stopped, goneAt being when the peer's identity Lease was seen gone (zero
// if it was not, or came back); ev is what was seen.
func onlyGoneVerdict(entry, gone string, as []Attempt, timeout time.Duration, goneAt time.Time, ev []string) promise.Verdict {
	const id = "proxy.fault.only-peer-gone"
	if v := underFault(id, "requests through "+entry+" with "+gone+" stopped", len(as)); v != nil {
		return *v
	}
	codes := Codes(as)
	var bad, causes []string
	for _, a := range as {
		switch {
		case a.Took >= timeout || a.Code == 0:
			bad = append(bad, "no answer: "+a.String())
			causes = append(causes, promise.UnknownCause)
		case a.Code == 200:
			bad = append(bad, "served although nothing serves it: "+a.String())
			causes = append(causes, promise.UnknownCause)
		case a.Code != 503 && a.Code != 404: // a 404 is judged below
			bad = append(bad, "answered neither 503 nor 404: "+a.String())
			causes = append(causes, promise.UnknownCause)
		}
	}
	if n := codes[404]; n > 0 {
		bad = append(bad, fmt.Sprintf("%d of %d answered 404, not 503", n, len(as)))
		causes = append(causes, notFoundCauses(as, goneAt, CauseNoCapablePeer)...)
	}
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Causes: causes,
			Reason: fmt.Sprintf("with its only capable peer %s stopped, %s: %s", gone, entry, strings.Join(bad[:min(3, len(bad))], "; "))}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}
