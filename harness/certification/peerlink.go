package certification

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// LinkPromises are the promises CheckPeerLink judges.
var LinkPromises = []promise.ID{"proxy.fault.black-hole", "proxy.fault.slow-link", "proxy.fault.no-duplicate-write"}

// Bounds of the peer-link faults.
const (
	// holeMargin is what the black-hole bound allows past the entry's
	// --request-timeout (blackHoleBound): the 504 written and carried back
	// on a machine whose two cores are busy.
	holeMargin = 5 * time.Second
	// defaultRequestTimeout is kube-apiserver's --request-timeout when
	// the flag is not given (kubeadm does not give it).
	defaultRequestTimeout = time.Minute
	// holeDeadline is the deadline the black hole's requests ask the
	// entry for (?timeout=, which every client-go request states; the
	// entry keeps the lesser of it and its --request-timeout). A request
	// whose only capable peer is black-holed is held to that deadline and
	// answered 504, or 503 sooner if the proxy gives up its dial (seen at
	// ~45 s): asked for 10 s the check waits seconds, not the minute
	// kubeadm's default allows, and judges the same thing - that the
	// entry ends the request by its deadline, explicitly.
	holeDeadline = 10 * time.Second
	// slowAboveBound: a link slower than the proxy's TLS handshake timeout
	// (10 s) is given up at the handshake: an explicit 503 well before the
	// request timeout.
	slowAboveBound = 20 * time.Second
)

// linkRun is one run of the peer-link checks: the window's first older
// apiserver, asked for the window's resource while its link to the first
// newer one (the only capable peer it has in a one-newer window) is cut
// or slowed.
type linkRun struct {
	c         *cluster.Cluster
	w         *Window
	old, peer cluster.Node
	// holeBound is how long a request may take under the black hole:
	// blackHoleBound of the entry's own flags and holeDeadline.
	holeBound time.Duration
	run       string                     // the label value of what this run creates
	obj       *unstructured.Unstructured // a sample object to create; nil: none, reads only
}

// CheckPeerLink judges the proxy with the link from the window's first
// older apiserver to its first newer one black-holed (every packet
// dropped), then slowed below, between and above the proxy's timeouts (a
// userspace relay: the kernel has no netem):
//   - proxy.fault.black-hole: a read and a write through the older server,
//     each asking for a deadline of holeDeadline, are each answered 503
//     or 504 within blackHoleBound, never 404.
//   - proxy.fault.slow-link: +100 ms each way, five reads are served, each
//     at least a round trip slower; +6 s each way (past the 10 s TLS
//     handshake timeout), a read is an explicit 503 within slowAboveBound.
//   - proxy.fault.no-duplicate-write: the write under the black hole, and a
//     write at +3 s each way whose client gives up after it reached the
//     peer, each made at most one object, watched while the answer
//     travels back. An error without a sample object of the resource.
//
// Every fault is reverted before it returns, whatever happened.
func CheckPeerLink(ctx context.Context, c *cluster.Cluster, w *Window) []promise.Verdict {
	holeID, slowID, dupID := LinkPromises[0], LinkPromises[1], LinkPromises[2]
	failAll := func(format string, args ...any) []promise.Verdict {
		return []promise.Verdict{fail(holeID, format, args...), fail(slowID, format, args...), fail(dupID, format, args...)}
	}
	l := &linkRun{c: c, w: w, run: fmt.Sprintf("link-%x", time.Now().UnixNano()&0xffffffffff)}
	var err error
	if l.old, err = c.Node(ctx, w.Old[0].Name); err != nil {
		return failAll("%v", err)
	}
	if l.peer, err = c.Node(ctx, w.New[0].Name); err != nil {
		return failAll("%v", err)
	}
	flags, err := apiserverFlags(ctx, l.old)
	if err != nil {
		return failAll("%v", err)
	}
	if l.holeBound, err = blackHoleBound(flags, holeDeadline); err != nil {
		return failAll("%v", err)
	}
	if obj, err := sample(w.Resource); err == nil {
		l.obj = obj
	}
	defer l.cleanUp(context.WithoutCancel(ctx))

	hole, holeMade := l.blackHole(ctx)
	slow, slowMade := l.slowLink(ctx)
	dup := promise.Errored(dupID, "no sample object of %s (add one at %s): no write to make", w.Resource.Key(), samplePath(w.Resource))
	if l.obj != nil {
		dup = dupVerdict(holeMade, slowMade)
	}
	return []promise.Verdict{hole, slow, dup}
}

// dupVerdict judges proxy.fault.no-duplicate-write on what the writes
// under the faults made.
func dupVerdict(made ...written) promise.Verdict {
	const id = "proxy.fault.no-duplicate-write"
	var said []string
	for _, w := range made {
		said = append(said, w.said)
	}
	for _, w := range made {
		if w.bad {
			return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: said, Reason: w.said}
		}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: said}
}

// blackHoleBound is how long a request through an apiserver run with
// flags, asking for a deadline of asked, may take while its only capable
// peer is black-holed: the entry gives up at the lesser of asked and its
// --request-timeout (default 1 min) and answers 504 - the proxy's own
// dial may answer 503 sooner - plus holeMargin. Past it is a hang.
// Derived from the request and the flags the cluster runs, never fitted.
func blackHoleBound(flags []string, asked time.Duration) (time.Duration, error) {
	timeout := defaultRequestTimeout
	for _, f := range flags {
		if v, ok := strings.CutPrefix(f, "--request-timeout="); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return 0, fmt.Errorf("the entry's --request-timeout=%s is not a duration", v)
			}
			timeout = d
		}
	}
	return min(timeout, asked) + holeMargin, nil
}

// askingDeadline makes every request of cfg ask the server for deadline
// (?timeout=), whatever the client itself waits (cfg.Timeout, which
// client-go would otherwise ask for).
func askingDeadline(cfg *rest.Config, deadline time.Duration) *rest.Config {
	return editingRequests(cfg, func(req *http.Request) {
		q := req.URL.Query()
		q.Set("timeout", deadline.String())
		req.URL.RawQuery = q.Encode()
	})
}

// namingAuditID makes every request of cfg name auditID as its Audit-ID,
// which kube-apiserver takes as the request's audit ID.
func namingAuditID(cfg *rest.Config, auditID string) *rest.Config {
	return editingRequests(cfg, func(req *http.Request) { req.Header.Set("Audit-ID", auditID) })
}

// editingRequests is a copy of cfg whose every request edit changes, on a
// clone of it, before it is sent.
func editingRequests(cfg *rest.Config, edit func(*http.Request)) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			edit(req)
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// api is the window's resource through the older server, with a client
// timeout.
func (l *linkRun) api(timeout time.Duration) (dynamic.ResourceInterface, error) {
	return l.w.api(l.w.Old[0].WithTimeout(timeout), "default")
}

// withFault runs fn from a working route (RouteWorks) with f injected,
// and reverts f however fn ends.
func withFault(ctx context.Context, c *cluster.Cluster, w *Window, f faults.Fault, fn func() error) error {
	if _, err := w.RouteWorks(ctx, "default"); err != nil {
		return fmt.Errorf("before %s: %w", f.Name(), err)
	}
	return injected(ctx, c, f, fn)
}

// injected runs fn with f injected, and reverts f however fn ends.
func injected(ctx context.Context, c *cluster.Cluster, f faults.Fault, fn func() error) error {
	if err := f.Inject(ctx, c); err != nil {
		_ = f.Revert(context.WithoutCancel(ctx), c)
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	ferr := fn()
	if err := f.Revert(context.WithoutCancel(ctx), c); err != nil {
		return fmt.Errorf("reverting %s: %w", f.Name(), err)
	}
	return ferr
}

// with is withFault in the run's cluster and window.
func (l *linkRun) with(ctx context.Context, f faults.Fault, fn func() error) error {
	return withFault(ctx, l.c, l.w, f, fn)
}

// write creates one object of the run through api; with no sample, it
// does nothing and says so.
func (l *linkRun) write(ctx context.Context, api dynamic.ResourceInterface, start time.Time) (Attempt, bool) {
	if l.obj == nil {
		return Attempt{}, false
	}
	obj := l.obj.DeepCopy()
	l.w.mark(obj, l.run, "default")
	return Try(start, func() error { _, err := api.Create(ctx, obj, metav1.CreateOptions{}); return err }), true
}

// mine selects the objects of the run.
func (l *linkRun) mine() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: routeLabel + "=" + l.run}
}

// made counts the objects of the run, asked of the newer server.
func (l *linkRun) made(ctx context.Context) (int, error) {
	api, err := l.w.api(l.w.New[0], "default")
	if err != nil {
		return 0, err
	}
	list, err := api.List(ctx, l.mine())
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// written is what a write under a fault made, said for the evidence; bad
// when it made more than one object, or could not be counted.
type written struct {
	said string
	bad  bool
}

// noWrite is what a run without a sample object writes.
var noWrite = written{said: "no write made (no sample object)"}

// uncounted is a write whose objects could not be counted.
func uncounted(err error) written { return written{said: "could not count: " + err.Error(), bad: true} }

// mostMade counts the objects of the run every second for d and returns
// the most seen: one write makes one object, and a retried one would show
// a second while the first answer travels back.
func (l *linkRun) mostMade(ctx context.Context, what string, d time.Duration) written {
	most := 0
	var failed error
	if err := wait.Sample(ctx, d, time.Second, func() bool {
		n, err := l.made(ctx)
		if err != nil {
			failed = fmt.Errorf("what %s made: %w", what, err)
			return false
		}
		most = max(most, n)
		return true
	}); err != nil {
		failed = fmt.Errorf("counting what %s made: %w", what, err)
	}
	if failed != nil {
		return uncounted(failed)
	}
	return countedWrite(what, most, l.w.New[0].Name, d)
}

// countedWrite is what a write made: most objects, counted through
// server for d; more than one is a duplicate.
func countedWrite(what string, most int, server string, d time.Duration) written {
	if most > 1 {
		return written{said: fmt.Sprintf("%s made %d objects: retried into a duplicate", what, most), bad: true}
	}
	return written{said: fmt.Sprintf("%s made %d object(s), counted through %s for %s", what, most, server, d)}
}

func (l *linkRun) cleanUp(ctx context.Context) {
	if l.obj == nil {
		return
	}
	if api, err := l.w.api(l.w.New[0], "default"); err == nil {
		_ = api.DeleteCollection(ctx, metav1.DeleteOptions{}, l.mine())
	}
}

// blackHole judges proxy.fault.black-hole and says what the write made.
// Each request names its own Audit-ID, so the entry's audit log says how
// the entry ended a request whose client got no answer it could read.
func (l *linkRun) blackHole(ctx context.Context) (promise.Verdict, written) {
	const id = "proxy.fault.black-hole"
	apis := map[string]dynamic.ResourceInterface{}
	auditIDs := map[string]string{}
	for _, what := range []string{"list", "create"} {
		entry := l.w.Old[0].WithTimeout(l.holeBound + 25*time.Second)
		auditIDs[what] = string(uuid.NewUUID())
		entry.Config = namingAuditID(askingDeadline(entry.Config, holeDeadline), auditIDs[what])
		api, err := l.w.api(entry, "default")
		if err != nil {
			return fail(id, "%v", err), uncounted(err)
		}
		apis[what] = api
	}
	f := &faults.BlackHole{From: l.old, To: l.peer}
	tried := map[string]Attempt{}
	err := l.with(ctx, f, func() error {
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		wg.Add(2)
		go func() {
			defer wg.Done()
			a := Try(start, func() error { _, err := apis["list"].List(ctx, metav1.ListOptions{Limit: 1}); return err })
			a.AuditID = auditIDs["list"]
			mu.Lock()
			tried["list"] = a
			mu.Unlock()
		}()
		go func() {
			defer wg.Done()
			if a, ok := l.write(ctx, apis["create"], start); ok {
				a.AuditID = auditIDs["create"]
				mu.Lock()
				tried["create"] = a
				mu.Unlock()
			}
		}()
		wg.Wait()
		return nil
	})
	if err != nil {
		return fail(id, "%v", err), uncounted(err)
	}
	made := noWrite
	if _, ok := tried["create"]; ok {
		made = l.mostMade(ctx, "the create under the black hole", 3*time.Second)
	}
	entry := l.w.Old[0].Name
	return holeVerdict(f.Name(), l.w.Resource.Key(), entry, l.holeBound, tried, func(auditID string) (*audit.Event, error) {
		return completedAt(l.c, entry, auditID)
	}), made
}

// CauseTimeoutAbort is why a client under the black hole got its stream
// reset, not an answer, at the deadline it asked for: the request's
// context ends at that deadline for the proxy's dial and for the entry's
// timeout filter alike; when the proxy's error handler has begun its 503
// as the filter fires, the filter cannot write its 504 and resets the
// stream on purpose (k8s.io/apiserver pkg/server/filters/timeout.go,
// baseTimeoutWriter.timeout). Found only when the entry's audit log has
// that very request ending in 503 or 504 at its deadline.
const CauseTimeoutAbort = "timeout-aborted-response"

// holeVerdict judges proxy.fault.black-hole on how the list and the create
// tried through entry under the fault named fault ended, bound being
// blackHoleBound of the entry's flags; ended reads the entry's final audit
// event of an attempt by its audit ID, for an attempt that got no answer.
func holeVerdict(fault, key, entry string, bound time.Duration, tried map[string]Attempt, ended func(auditID string) (*audit.Event, error)) promise.Verdict {
	const id = "proxy.fault.black-hole"
	if v := underFault(id, "requests through "+entry+" under "+fault, len(tried)); v != nil {
		return *v
	}
	var bad, ev, causes []string
	for _, what := range []string{"list", "create"} {
		a, ok := tried[what]
		if !ok {
			continue
		}
		ev = append(ev, fmt.Sprintf("%s: %s %s through %s: %s", fault, what, key, entry, a))
		switch {
		case a.Code == 404:
			bad = append(bad, fmt.Sprintf("%s answered 404 (a false 404: the resource exists): %s", what, a))
			causes = append(causes, promise.UnknownCause)
		case a.Code == 0 && a.Took < bound:
			bad = append(bad, fmt.Sprintf("%s: want an explicit 503 or the entry's 504 timeout: %s", what, a))
			cause, said := abortedAtDeadline(entry, a, ended)
			causes = append(causes, cause)
			ev = append(ev, said)
		case a.Code != 503 && a.Code != 504:
			bad = append(bad, fmt.Sprintf("%s: want an explicit 503 or the entry's 504 timeout: %s", what, a))
			causes = append(causes, promise.UnknownCause)
		case a.Took >= bound:
			bad = append(bad, fmt.Sprintf("%s answered after %s, past the bound %s: %s", what, a.Took.Round(100*time.Millisecond), bound, a))
			causes = append(causes, promise.UnknownCause)
		}
	}
	ev = append(ev, fmt.Sprintf("bound %s: the deadline each request asked for (?timeout=%s) or %s's --request-timeout if shorter, and %s", bound, holeDeadline, entry, holeMargin))
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Causes: causes, Reason: strings.Join(bad, "; ")}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

// abortedAtDeadline is the cause of an attempt through entry that got no
// answer within the bound, and what was read for it: CauseTimeoutAbort
// when entry's audit log ends that very request (its Audit-ID) in 503 or
// 504 no earlier than the deadline it asked for; unknown otherwise.
func abortedAtDeadline(entry string, a Attempt, ended func(auditID string) (*audit.Event, error)) (cause, said string) {
	if a.AuditID == "" {
		return promise.UnknownCause, "no audit ID to look the request up by"
	}
	e, err := ended(a.AuditID)
	switch {
	case err != nil:
		return promise.UnknownCause, fmt.Sprintf("%s's audit log: %v", entry, err)
	case e == nil:
		return promise.UnknownCause, fmt.Sprintf("%s's audit log has no final stage for %s", entry, a.AuditID)
	}
	code := int32(0)
	if e.ResponseStatus != nil {
		code = e.ResponseStatus.Code
	}
	took := e.StageTimestamp.Sub(e.RequestReceivedTimestamp.Time)
	said = fmt.Sprintf("%s's audit log: %s ended in stage %s, code %d, %s after it was received", entry, a.AuditID, e.Stage, code, took.Round(time.Millisecond))
	if e.Stage == auditv1.StageResponseComplete && (code == 503 || code == 504) && took >= holeDeadline-100*time.Millisecond {
		return CauseTimeoutAbort, said + ": the entry answered at the deadline, and its timeout filter reset the stream of the answer under way"
	}
	return promise.UnknownCause, said
}

// slowLink judges proxy.fault.slow-link and says what the write between the
// timeouts made.
func (l *linkRun) slowLink(ctx context.Context) (promise.Verdict, written) {
	const id = "proxy.fault.slow-link"
	slow := func(d time.Duration) *faults.SlowLink { return &faults.SlowLink{From: l.old, To: l.peer, Delay: d} }
	var seen slowSeen

	// Below: +100 ms each way, five reads, each at least a round trip slower.
	api, err := l.api(30 * time.Second)
	if err != nil {
		return fail(id, "%v", err), uncounted(err)
	}
	var below []Attempt
	f := slow(100 * time.Millisecond)
	if err := l.with(ctx, f, func() error {
		start := time.Now()
		for range 5 {
			below = append(below, Try(start, func() error { _, err := api.List(ctx, metav1.ListOptions{Limit: 1}); return err }))
		}
		return nil
	}); err != nil {
		return fail(id, "%v", err), uncounted(err)
	}
	seen.below, seen.belowFault = below, f.Name()

	// Between: +3 s each way. The TLS handshake takes 6 s, the create
	// reaches the peer at ~9 s, its answer would be back at ~12 s; the
	// client gives up at 10.5 s.
	made := noWrite
	if l.obj != nil {
		wapi, err := l.api(10500 * time.Millisecond)
		if err != nil {
			return fail(id, "%v", err), uncounted(err)
		}
		f = slow(3 * time.Second)
		if err := l.with(ctx, f, func() error {
			a, _ := l.write(ctx, wapi, time.Now())
			seen.between, seen.betweenFault = &a, f.Name()
			made = l.mostMade(ctx, "the create given up at +3 s each way", 8*time.Second)
			return nil
		}); err != nil {
			return fail(id, "%v", err), uncounted(err)
		}
	}

	// Above: +6 s each way; the handshake (12 s) outlasts its 10 s timeout.
	api, err = l.api(35 * time.Second)
	if err != nil {
		return fail(id, "%v", err), made
	}
	f = slow(6 * time.Second)
	var above Attempt
	if err := l.with(ctx, f, func() error {
		above = Try(time.Now(), func() error { _, err := api.List(ctx, metav1.ListOptions{Limit: 1}); return err })
		return nil
	}); err != nil {
		return fail(id, "%v", err), made
	}
	seen.above, seen.aboveFault = above, f.Name()
	return slowVerdict(l.w.Old[0].Name, seen), made
}

// slowSeen is what the slow-link check saw through the entry, with each
// fault's name: the reads below the timeouts, the create between them
// (nil without a sample object), the read above them.
type slowSeen struct {
	below                                []Attempt
	between                              *Attempt
	above                                Attempt
	belowFault, betweenFault, aboveFault string
}

// slowVerdict judges proxy.fault.slow-link on what was seen through entry.
func slowVerdict(entry string, seen slowSeen) promise.Verdict {
	const id = "proxy.fault.slow-link"
	var bad, ev, took []string
	for _, a := range seen.below {
		took = append(took, a.Took.Round(10*time.Millisecond).String())
		if a.Code != 200 || a.Took < 200*time.Millisecond {
			bad = append(bad, fmt.Sprintf("%s: want 200 in at least a round trip (200ms): %s", seen.belowFault, a))
		}
	}
	ev = append(ev, fmt.Sprintf("%s: 5 lists through %s: %v in %s", seen.belowFault, entry, Codes(seen.below), strings.Join(took, ", ")))
	if a := seen.between; a != nil {
		ev = append(ev, fmt.Sprintf("%s: create through %s with a 10.5 s client timeout: %s", seen.betweenFault, entry, *a))
		if a.Code == 404 {
			bad = append(bad, fmt.Sprintf("%s: create answered 404: %s", seen.betweenFault, *a))
		}
	}
	ev = append(ev, fmt.Sprintf("%s: list through %s: %s", seen.aboveFault, entry, seen.above))
	if seen.above.Code != 503 || seen.above.Took >= slowAboveBound {
		bad = append(bad, fmt.Sprintf("%s: want an explicit 503 within %s (past the TLS handshake timeout): %s", seen.aboveFault, slowAboveBound, seen.above))
	}
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: strings.Join(bad, "; ")}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

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
