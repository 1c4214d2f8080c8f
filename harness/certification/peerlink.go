package certification

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/dynamic"

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
	l := &linkRun{c: c, w: w, run: "link-" + runID()}
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
// under the faults made: the one under the black hole (hole) and the one
// its client gave up on as the slowed link carried it (between). Only the
// latter can be retried into a duplicate - it reaches the peer, whose
// answer comes too late - so if it made no object, nothing was shown.
func dupVerdict(hole, between written) promise.Verdict {
	const id = "proxy.fault.no-duplicate-write"
	said := []string{hole.said, between.said}
	for _, w := range []written{hole, between} {
		if w.bad {
			return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: said, Reason: w.said}
		}
	}
	if !between.reached {
		return promise.Verdict{ID: id, Outcome: promise.Error, Evidence: said,
			Reason: "the write given up on the slowed link made no object: it never reached the peer, so no retry could have duplicated it"}
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

// api is the window's resource through the older server, with a client
// timeout.
func (l *linkRun) api(timeout time.Duration) (dynamic.ResourceInterface, error) {
	return l.w.api(l.w.Old[0].WithTimeout(timeout), "default")
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
	// reached says the write made an object.
	reached bool
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
	return written{said: fmt.Sprintf("%s made %d object(s), counted through %s for %s", what, most, server, d), reached: most == 1}
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
