package certification

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// CheckUntrustedPeer judges proxy.trust.untrusted-peer (issue 14 item 3a)
// in a window with one newer apiserver: it is restarted serving a
// certificate with its own names that a CA made for the fault signed
// (faults.UntrustedServing), which no --peer-ca-file holds, and the
// window's resource - which only it serves - is asked for through the
// first older apiserver every half second for 20 s. Nothing may reach it:
// no request is served, none is in its audit log (the handshake fails
// before a request is read), every answer comes within answerBound and is
// an explicit 503, and the older server's rerouted counter counts each
// 503 (the failure visible in the metrics). A 404 instead - the older
// server's peer-discovery sync cannot fetch the untrusted peer's
// discovery either, and leaves it out - fails with its cause. Where the
// older server counts peer-discovery sync errors (1.36 on), how far they
// moved is evidence.
func CheckUntrustedPeer(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.trust.untrusted-peer"
	if len(w.New) != 1 {
		return promise.Errored(id, "the check needs a window with one newer apiserver; this one has %d", len(w.New))
	}
	old, peer := w.Old[0], w.New[0]
	node, err := c.Node(ctx, peer.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	peerID, err := identityLease(ctx, c, peer.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	f := &faults.UntrustedServing{Node: node}
	ids := &auditIDs{}
	var as []Attempt
	var before, after metrics.Snapshot
	var reached error
	injectedAt := time.Now()
	if err := withFault(ctx, c, w, f, func() (err error) {
		if before, err = scrape(ctx, old); err != nil {
			return err
		}
		if as, err = w.Probe(ctx, old, 20*time.Second, 500*time.Millisecond, 35*time.Second, ids); err != nil {
			return err
		}
		if after, err = scrape(ctx, old); err != nil {
			return err
		}
		// Read while the fault holds: the untrusted server logs what
		// reached it until its restart.
		reached = notForwarded(ctx, c, old, []Server{peer}, ids.all())
		return nil
	}); err != nil {
		return fail(id, "%v", err)
	}
	return untrustedVerdict(untrustedSeen{fault: f.Name(), key: w.Resource.Key(), entry: old.Name, peer: peer.Name, peerID: peerID,
		as: as, before: before, after: after, reached: reached},
		func() (string, time.Time, error) { return rebuiltWithout(ctx, c, old.Name, peerID, injectedAt) })
}

// untrustedSeen is what the untrusted-peer check saw through entry, with
// peer (its identity Lease peerID) serving a certificate the peer CA did
// not sign: the attempts, entry's scrapes around them, and whether any
// of them reached the peer (reached, from its audit log).
type untrustedSeen struct {
	fault, key, entry, peer, peerID string
	as                              []Attempt
	before, after                   metrics.Snapshot
	reached                         error
}

// untrustedVerdict judges proxy.trust.untrusted-peer on what was seen;
// rebuilt reads, when a 404 came, the entry's log for the rebuild of its
// peer cache without the peer, and when it was logged.
func untrustedVerdict(in untrustedSeen, rebuilt func() (string, time.Time, error)) promise.Verdict {
	const id = "proxy.trust.untrusted-peer"
	as, old, peer, peerID, reached := in.as, in.entry, in.peer, in.peerID, in.reached
	if v := underFault(id, "requests through "+old+" with "+peer+" untrusted", len(as)); v != nil {
		return *v
	}
	codes := Codes(as)
	moved503, merr := metrics.Delta(in.before, in.after, rerouted, map[string]string{"code": "503"})
	ev := []string{fmt.Sprintf("%s: %s through %s every 500 ms for 20 s: %v; %s", in.fault, in.key, old, codes, strings.Join(messages(as), ", ")),
		fmt.Sprintf("%s{code=503} on %s moved by %g (%v)", rerouted, old, moved503, orOK(merr))}
	if moved, err := metrics.Delta(in.before, in.after, peerDiscoverySyncErrors, nil); err == nil {
		ev = append(ev, fmt.Sprintf("%s on %s moved by %g", peerDiscoverySyncErrors, old, moved))
	}
	var bad, causes []string
	if reached != nil {
		bad = append(bad, reached.Error())
		causes = append(causes, promise.UnknownCause)
	} else {
		ev = append(ev, fmt.Sprintf("none of the %d requests is in %s's audit log", len(as), peer))
	}
	for _, a := range as {
		switch {
		case a.Code == 0 || a.Took > answerBound:
			bad = append(bad, "no answer within "+answerBound.String()+": "+a.String())
			causes = append(causes, promise.UnknownCause)
		case a.Code == 200:
			bad = append(bad, "served, though only the untrusted peer serves it: "+a.String())
			causes = append(causes, promise.UnknownCause)
		case a.Code != 503 && a.Code != 404: // a 404 is judged below
			bad = append(bad, "answered neither 503 nor 404: "+a.String())
			causes = append(causes, promise.UnknownCause)
		}
	}
	if n := codes[404]; n > 0 {
		bad = append(bad, fmt.Sprintf("%d of %d answered 404, not an explicit 503", n, len(as)))
		line, at, err := rebuilt()
		if err != nil {
			ev = append(ev, err.Error())
		} else if line != "" {
			ev = append(ev, fmt.Sprintf("%s rebuilt its peer cache without %s (%s) at %s: %s", old, peer, peerID, at.Format("15:04:05.000"), line))
		}
		causes = append(causes, notFoundCauses(as, at, CausePeerCacheRebuilt)...)
	}
	if n := codes[503]; n > 0 && moved503 < float64(n) {
		bad = append(bad, fmt.Sprintf("%d answers were 503, but %s{code=503} on %s moved by %g (%v)", n, rerouted, old, moved503, orOK(merr)))
		causes = append(causes, promise.UnknownCause)
	}
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Causes: causes,
			Reason: fmt.Sprintf("with %s serving a certificate the peer CA did not sign, %s: %s", peer, old, strings.Join(bad[:min(3, len(bad))], "; "))}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}
