package certification

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// auditIDs keeps the Audit-Id of every response a client got.
type auditIDs struct {
	mu  sync.Mutex
	ids []string
}

func (a *auditIDs) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			a.mu.Lock()
			a.ids = append(a.ids, resp.Header.Get("Audit-Id"))
			a.mu.Unlock()
		}
		return resp, err
	})
}

// config is a copy of cfg whose responses' Audit-Ids a keeps.
func (a *auditIDs) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(a.wrap)
	return cfg
}

// last is the Audit-Id of the latest response.
func (a *auditIDs) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ids) == 0 {
		return ""
	}
	return a.ids[len(a.ids)-1]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// completedAt is the final audit event of id in node's audit log, if any.
func completedAt(c *cluster.Cluster, node, id string) (*audit.Event, error) {
	got, err := audit.Final([]string{c.AuditLog(node)}, []string{id})
	if err != nil || len(got[id]) == 0 {
		return nil, err
	}
	return &got[id][len(got[id])-1].Event, nil
}

// notForwarded checks that requests entry served itself (ids, their
// Audit-Ids) are in entry's audit log and in no other server's.
func notForwarded(ctx context.Context, c *cluster.Cluster, entry Server, others []Server, ids []string) error {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	final := func(node string) ([]audit.Event, error) {
		return audit.Read(c.AuditLog(node), func(e *audit.Event) bool {
			return want[string(e.AuditID)] && (e.Stage == "ResponseComplete" || e.Stage == "Panic")
		})
	}
	err := wait.For(ctx, "certify/audit-written", fmt.Sprintf("%d requests in %s's audit log", len(want), entry.Name), func(ctx context.Context) (bool, string, error) {
		evs, err := final(entry.Name)
		if err != nil {
			return false, "", err
		}
		return len(evs) >= len(want), fmt.Sprintf("%d of %d logged", len(evs), len(want)), nil
	})
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.Name == entry.Name {
			continue
		}
		evs, err := final(o.Name)
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			return fmt.Errorf("%s logged %d of the requests %s served itself (audit ID %s first): forwarded", o.Name, len(evs), entry.Name, evs[0].AuditID)
		}
	}
	return nil
}

// servedAt waits until each request of ids (Audit-Ids) is in the audit
// log of one of peers, and returns the name of the server that logged
// each, sorted (tally counts them); what it found when the wait ends
// otherwise, with the error.
func servedAt(ctx context.Context, c *cluster.Cluster, peers []Server, ids []string) ([]string, error) {
	var paths []string
	for _, s := range peers {
		paths = append(paths, c.AuditLog(s.Name))
	}
	var logged map[string][]audit.Logged
	err := wait.For(ctx, "certify/audit-written", fmt.Sprintf("%d requests' audit events at %v", len(ids), names(peers)), func(ctx context.Context) (bool, string, error) {
		var err error
		logged, err = audit.Final(paths, ids)
		return len(logged) == len(ids), fmt.Sprintf("%d of %d found", len(logged), len(ids)), err
	})
	var where []string
	for _, evs := range logged {
		for _, e := range evs {
			where = append(where, e.Server())
		}
	}
	sort.Strings(where)
	return where, err
}

// all is every Audit-Id kept, in order.
func (a *auditIDs) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

// CheckAudit judges proxy.audit.complete, and with FinalStages
// proxy.audit.final-stage and watch-final-stage, on requests made through an
// older apiserver and forwarded (ids, their Audit-Ids): each is logged
// once by the entry server and once by one newer peer, under the same
// audit ID, as the same user; and each ends at the entry server in a
// final stage that is not Panic.
func CheckAudit(ctx context.Context, c *cluster.Cluster, w *Window, ids []string) []promise.Verdict {
	const complete = "proxy.audit.complete"
	old := w.Old[0]
	if len(ids) == 0 {
		return []promise.Verdict{promise.NothingObserved(complete, 1, "proxied requests", 0), promise.NothingObserved(finalStage, 1, "proxied requests", 0),
			promise.NothingObserved(watchFinalStage, 1, "proxied watches", 0)}
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	t, err := readTrail(ctx, c, w, want)
	counted := fmt.Sprintf("%d sent through %s; %d logged there, %d at the peers; %d missing, %d duplicated, %d under another user",
		len(want), old.Name, len(t.entry), len(t.peers), len(t.missing), len(t.dup), len(t.otherUser))
	var out []promise.Verdict
	switch {
	case err != nil && len(t.missing) == 0:
		out = append(out, fail(complete, "%v", err))
	case len(t.missing)+len(t.dup)+len(t.otherUser) > 0:
		v := fail(complete, "%s", counted)
		v.Evidence = append(append(append([]string{}, t.missing...), t.dup...), t.otherUser...)
		out = append(out, v)
	default:
		out = append(out, promise.Verdict{ID: complete, Outcome: promise.Pass, Evidence: []string{counted}})
	}
	var finals []audit.Event
	for _, evs := range t.entry {
		finals = append(finals, evs...)
	}
	return append(out, FinalStages(old.Name, finals, t.peers)...)
}

// auditTrail is where the requests sent through a window's first older
// apiserver were logged, by audit ID: their final events at that entry
// and at the newer peers, and which were missing from either, logged
// twice, or logged under another user at the peer.
type auditTrail struct {
	entry, peers            map[string][]audit.Event
	missing, dup, otherUser []string
}

// readTrail reads the trail of the requests want from the audit logs of
// w's first older apiserver and its newer ones, until every one is in
// both (or the wait's budget ends: the error says so).
func readTrail(ctx context.Context, c *cluster.Cluster, w *Window, want map[string]bool) (auditTrail, error) {
	read := func(node string) (map[string][]audit.Event, error) {
		evs, err := audit.Read(c.AuditLog(node), func(e *audit.Event) bool {
			return want[string(e.AuditID)] && (e.Stage == "ResponseComplete" || e.Stage == "Panic")
		})
		out := map[string][]audit.Event{}
		for _, e := range evs {
			out[string(e.AuditID)] = append(out[string(e.AuditID)], e)
		}
		return out, err
	}
	var t auditTrail
	err := wait.For(ctx, "certify/audit-written", fmt.Sprintf("%d requests' audit events", len(want)), func(ctx context.Context) (bool, string, error) {
		var err error
		if t.entry, err = read(w.Old[0].Name); err != nil {
			return false, "", err
		}
		t.peers = map[string][]audit.Event{}
		for _, p := range w.New {
			got, err := read(p.Name)
			if err != nil {
				return false, "", err
			}
			for id, evs := range got {
				t.peers[id] = append(t.peers[id], evs...)
			}
		}
		t.missing, t.dup, t.otherUser = nil, nil, nil
		for id := range want {
			e, p := t.entry[id], t.peers[id]
			switch {
			case len(e) == 0 || len(p) == 0:
				t.missing = append(t.missing, id)
			case len(e) > 1 || len(p) > 1:
				t.dup = append(t.dup, id)
			case e[0].User.Username != p[0].User.Username:
				t.otherUser = append(t.otherUser, fmt.Sprintf("%s (%s at the entry, %s at the peer)", id, e[0].User.Username, p[0].User.Username))
			}
		}
		return len(t.missing) == 0, fmt.Sprintf("%d of %d not yet in both logs", len(t.missing), len(want)), nil
	})
	return t, err
}

const finalStage, watchFinalStage = "proxy.audit.final-stage", "proxy.audit.watch-final-stage"

// auditPromises are what CheckAudit judges.
var auditPromises = []promise.ID{"proxy.audit.complete", finalStage, watchFinalStage}

// CauseReverseProxyAbort is why a proxied watch its client closed ends at
// the entry server in stage Panic: the entry's reverse proxy aborts the
// handler (http.ErrAbortHandler, recorded as Panic, code 500, "net/http:
// abort Handler") while the peer ends the same request in
// ResponseComplete.
const CauseReverseProxyAbort = "reverse-proxy-abort"

// FinalStages judges how proxied requests ended in the entry server's
// audit log (finals: their final events there, ResponseComplete or
// Panic; peers: the peers' final events by audit ID). A watch its client
// closed is judged apart, by proxy.audit.watch-final-stage: a Panic there
// is put down to CauseReverseProxyAbort only when the entry's event is
// that abort and the peer ended the request in ResponseComplete. Any
// other request in stage Panic fails proxy.audit.final-stage, which
// nothing waives. Each needs at least one request of its kind.
func FinalStages(entry string, finals []audit.Event, peers map[string][]audit.Event) []promise.Verdict {
	var watches, panics, watchPanics, causes []string
	for _, e := range finals {
		if e.Verb == "watch" {
			watches = append(watches, string(e.AuditID))
		}
		if e.Stage != "Panic" {
			continue
		}
		if e.Verb != "watch" {
			panics = append(panics, fmt.Sprintf("%s (%s %s)", e.AuditID, e.Verb, e.RequestURI))
			continue
		}
		cause, what := abortedWatch(e, peers[string(e.AuditID)])
		watchPanics = append(watchPanics, fmt.Sprintf("%s: %s", e.AuditID, what))
		causes = append(causes, cause)
	}
	others := len(finals) - len(watches)
	var out []promise.Verdict
	switch {
	case others == 0:
		out = append(out, promise.NothingObserved(finalStage, 1, "proxied requests other than watches ended at "+entry, 0))
	case len(panics) > 0:
		v := fail(finalStage, "%d of %d proxied requests (not watches) ended at %s in stage Panic", len(panics), others, entry)
		v.Evidence = panics
		out = append(out, v)
	default:
		out = append(out, promise.Verdict{ID: finalStage, Outcome: promise.Pass, Evidence: []string{fmt.Sprintf("%d proxied requests other than watches ended at %s in ResponseComplete", others, entry)}})
	}
	switch {
	case len(watches) == 0:
		out = append(out, promise.NothingObserved(watchFinalStage, 1, "proxied watches ended at "+entry, 0))
	case len(watchPanics) > 0:
		v := fail(watchFinalStage, "%d of %d proxied watches, closed by their client, ended at %s in stage Panic", len(watchPanics), len(watches), entry)
		v.Evidence, v.Causes = watchPanics, causes
		out = append(out, v)
	default:
		out = append(out, promise.Verdict{ID: watchFinalStage, Outcome: promise.Pass, Evidence: []string{fmt.Sprintf("%d proxied watches ended at %s in ResponseComplete", len(watches), entry)}})
	}
	return out
}

// abortedWatch says why a proxied watch ended at its entry in stage Panic
// (e), given its peers' final events: CauseReverseProxyAbort when e is the
// reverse proxy's abort and one peer ended it in ResponseComplete, else
// unknown; and what the events show.
func abortedWatch(e audit.Event, atPeers []audit.Event) (cause, what string) {
	code, msg := int32(0), ""
	if st := e.ResponseStatus; st != nil {
		code, msg = st.Code, st.Message
	}
	what = fmt.Sprintf("Panic at the entry, code %d %q", code, msg)
	completed := 0
	for _, p := range atPeers {
		what += fmt.Sprintf("; %s at the peer", p.Stage)
		if p.Stage == "ResponseComplete" {
			completed++
		}
	}
	if len(atPeers) == 0 {
		what += "; nothing at any peer"
	}
	if code == 500 && strings.Contains(msg, "abort Handler") && completed == 1 {
		return CauseReverseProxyAbort, what
	}
	return promise.UnknownCause, what
}
