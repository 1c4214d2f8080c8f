package certification

import (
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
)

// The judging each check moved out of its gathering passes the evidence
// of its promise held (TestEveryPromiseCanFail shows each failing).
func TestJudgesPassWhatHolds(t *testing.T) {
	ms := time.Millisecond
	v136 := version.MustParse("v1.36.3")
	start := parseMetrics(t, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 100\n")
	must := func(v *promise.Verdict, id promise.ID) promise.Verdict {
		if v != nil {
			return *v
		}
		return promise.Verdict{ID: id, Outcome: promise.Pass}
	}
	killed, _ := killedVerdict("cp1", "cp4", []Attempt{attempt(0, 5*ms, 503), attempt(16*time.Second, 3*ms, 503)}, true, time.Time{}, nil)
	_, route := watched("cp1", delivered("ADDED w-1", "MODIFIED w-1", "DELETED w-1"), []string{"ADDED w-1", "MODIFIED w-1", "DELETED w-1"}, time.After(time.Second))
	_, unmovedV := unmoved("cp1", false, nil, reroutedAt(t, 404, 2), reroutedAt(t, 404, 2))
	_, lacksNothing := unmoved("cp4", true, nil, start, start)
	trust := trustEvidence()
	versions := map[string]version.Version{"cp1": v136, "cp2": v136}
	only := []discovery.Resource{{Group: "x", Version: "v1", Resource: "ys"}}
	gr := schema.GroupResource{Group: "x", Resource: "ys"}
	names, backends := []string{"cp1", "cp2", "cp3"}, []string{"cp1:6443", "cp2:6443", "cp3:6443"}
	for _, v := range []promise.Verdict{
		killed,
		stoppedVerdict("cp4", []string{"cp5"}, []Attempt{attempt(0, 5*ms, 200), attempt(time.Second, 3*ms, 200)}, []string{"cp5"}, nil),
		holeVerdict("black hole", "x/v1/ys", "cp1", 65*time.Second, map[string]Attempt{"list": attempt(0, time.Minute, 504), "create": attempt(0, 3*ms, 503)}, noAudit),
		slowVerdict("cp1", slowSeen{below: []Attempt{attempt(0, 310*ms, 200)}, above: attempt(0, 12*time.Second, 503)}),
		dupVerdict(countedWrite("a create", 0, "cp4", time.Second), countedWrite("a create given up", 1, "cp4", time.Second)),
		onlyGoneVerdict("cp1", "cp4", []Attempt{attempt(0, 5*ms, 503)}, 35*time.Second, time.Time{}, nil),
		must(route, "proxy.route.verbs"),
		must(unmovedV, "proxy.route.no-false-forwarding"),
		must(lacksNothing, "proxy.route.no-false-forwarding"),
		loopGuardVerdict(Server{Name: "cp1"}, "/apis/x/v1/ys", notFound(), reroutedAt(t, 404, 2), reroutedAt(t, 404, 2), func() error { return nil }),
		reroutedVerdict("cp1", "x/v1/ys", 5, reroutedAt(t, 404, 2), reroutedAt(t, 404, 7)),
		must(scopeAnswers(Server{Name: "cp1"}, nil, apierrors.NewServiceUnavailable("no endpoints"), 30*ms), "proxy.scope.crd-apiservice"),
		must(goneAfterRollback(only[0], Server{Name: "cp1"}, notFound()), "proxy.rollback.all-old"),
		baselineVerdict("cp1 with the gate off", 0, notFound(), func() error { return nil }),
		gateOnAgain("cp1", "x/v1/ys", 3*time.Second, nil),
		must(betaWithoutCA("cp4", "x/v1/ys", 1, notFound()), "proxy.defaults.beta"),
		identityVerdict(trust), uidVerdict(trust), rbacVerdict(trust),
		forgedLeaseVerdict(forgedLeaseSeen{lease: "l", entry: "cp1", node: "cp1", lists: 20, where: []string{"cp4"}}),
		untrustedVerdict(untrustedSeen{entry: "cp1", peer: "cp4", as: []Attempt{attempt(0, 5*ms, 503)}, before: start,
			after: parseMetrics(t, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 100\n# TYPE "+rerouted+" counter\n"+rerouted+"{code=\"503\"} 1\n")},
			func() (string, time.Time, error) { t.Error("the log read without a 404"); return "", time.Time{}, nil }),
		versionsVerdict("rollout.versions", versions, offVersion(versions, v136)),
		versionsVerdict("rollout.rollback", versions, leftRecord(nil, nil)),
		membershipVerdict("a step", rollout.MembershipDiff(names, backends, names, names, backends)),
		convergedVerdict(v136, only, time.Second, nil),
		must(refusal("a rollout", "more than one minor", apierrors.NewBadRequest("more than one minor up"), 0), "rollout.refuses-bad-input"),
		must(unchanged("a rollout", "same", "same"), "rollout.refuses-bad-input"),
		recoveredVerdict(nil, "same", "same", time.Minute, versions),
		peerStatusVerdict("cp1", "cp4", "x/v1/ys", []refused{{what: "create of a name that exists", want: 409,
			entry: apierrors.NewAlreadyExists(gr, "y-1"), peer: apierrors.NewAlreadyExists(gr, "y-1")}}),
		rvVerdict("x/v1/ys", []seenRV{{what: "create", rv: "120", write: true}, {what: "list", rv: "120"}, {what: "patch", rv: "121", write: true}, {what: "watch", rv: "121"}}),
	} {
		if v.Outcome != promise.Pass {
			t.Errorf("%s %s: %s", v.ID, v.Outcome, v.Reason)
		}
	}
	if got := lacks("cp1", discovery.Set{"x/v1/ys": only[0]}, nil, only); len(got) != 0 {
		t.Errorf("a merged view that shows it lacks %v", got)
	}
	// An entry refusing for another reason (a 429, a 502) shows nothing of
	// the peer: not the explicit 503 either promise asks for.
	for _, code := range []int{429, 502} {
		if v := onlyGoneVerdict("cp1", "cp4", []Attempt{attempt(0, 5*ms, code)}, 35*time.Second, time.Time{}, nil); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "neither 503 nor 404") {
			t.Errorf("only-peer-gone answered %d: %s %s", code, v.Outcome, v.Reason)
		}
	}
	// A write given up on the slowed link that never reached the peer
	// shows no retry: nothing judged.
	if v := dupVerdict(countedWrite("a create", 0, "cp4", time.Second), countedWrite("a create given up", 0, "cp4", time.Second)); v.Outcome != promise.Error {
		t.Errorf("no object made: %s %s", v.Outcome, v.Reason)
	}
	// Nothing only the newer version serves: nothing to converge on, and
	// no pass on it.
	if v := convergedVerdict(v136, nil, time.Second, nil); v.Outcome != promise.NotApplicable {
		t.Errorf("no newer-only resource: %s %s", v.Outcome, v.Reason)
	}
}

// After a rollback a merged view that advertises what no server serves
// is said, key by key; one that advertises what some server serves is not.
func TestAdvertisedBeyond(t *testing.T) {
	ys, zs := discovery.Resource{Group: "x", Version: "v1", Resource: "ys"}, discovery.Resource{Group: "x", Version: "v1", Resource: "zs"}
	served := discovery.Set{ys.Key(): ys}
	if got := advertisedBeyond(discovery.Set{ys.Key(): ys}, served); len(got) != 0 {
		t.Errorf("what is served: %v", got)
	}
	if got := advertisedBeyond(discovery.Set{ys.Key(): ys, zs.Key(): zs}, served); !slices.Equal(got, []string{"still advertises x/v1/zs"}) {
		t.Errorf("what no server serves: %v", got)
	}
}

// A refusal the peer itself does not give as wanted leaves the promise
// unjudged, and a Status with other details through the entry fails it.
func TestPeerStatusNeedsThePeersRefusal(t *testing.T) {
	gr := schema.GroupResource{Group: "x", Resource: "ys"}
	v := peerStatusVerdict("cp1", "cp4", "x/v1/ys", []refused{{what: "create of a name that exists", want: 409, entry: nil, peer: nil}})
	if v.Outcome != promise.Error {
		t.Errorf("a peer that accepted: %s %s", v.Outcome, v.Reason)
	}
	v = peerStatusVerdict("cp1", "cp4", "x/v1/ys", []refused{{what: "create of a name that exists", want: 409,
		entry: apierrors.NewAlreadyExists(gr, "y-2"), peer: apierrors.NewAlreadyExists(gr, "y-1")}})
	if v.Outcome != promise.Fail || !strings.Contains(v.Reason, `"y-2"`) {
		t.Errorf("another object named through the entry: %s %s", v.Outcome, v.Reason)
	}
	if v := rvVerdict("x/v1/ys", []seenRV{{what: "create", rv: "abc"}}); v.Outcome != promise.Error {
		t.Errorf("a resourceVersion that is not a number: %s %s", v.Outcome, v.Reason)
	}
	if v := rvVerdict("x/v1/ys", []seenRV{{what: "create", rv: "7", write: true}, {what: "patch", rv: "7", write: true}}); v.Outcome != promise.Fail {
		t.Errorf("a write at the version already seen: %s %s", v.Outcome, v.Reason)
	}
}

// Below its floor a check that counts fails, nothing observed: an empty
// sample is no pass.
func TestFloors(t *testing.T) {
	w := &Window{Old: []Server{{Name: "cp1"}}, New: []Server{{Name: "cp4"}}}
	c := logs(t, map[string][]string{"cp1": {}, "cp4": {}})
	for _, v := range append(CheckAudit(t.Context(), c, w, nil), FinalStages("cp1", nil, nil)...) {
		if v.Outcome != promise.Fail || !strings.HasPrefix(v.Reason, "nothing observed") {
			t.Errorf("no proxied request: %s %s: %s", v.ID, v.Outcome, v.Reason)
		}
	}
	if v := CheckRunAudit(nil, nil); v.Outcome != promise.Fail || !strings.HasPrefix(v.Reason, "nothing observed") {
		t.Errorf("no audit log: %+v", v)
	}
}

// A check that judges each request made under a fault passes nothing on
// none: below its floor it fails "nothing observed", whatever else.
func TestFaultChecksNeedARequest(t *testing.T) {
	ms := time.Millisecond
	killedAlone, _ := killedVerdict("cp1", "cp4", nil, true, time.Time{}, nil)
	// With another capable peer, only requests past the dead one's
	// address TTL show it served: early ones alone prove nothing.
	killedEarly, _ := killedVerdict("cp1", "cp4", []Attempt{attempt(0, 5*ms, 200), attempt(time.Second, 3*ms, 200)}, false, time.Time{}, nil)
	for _, v := range []promise.Verdict{
		killedAlone,
		killedEarly,
		stoppedVerdict("cp4", []string{"cp5"}, nil, []string{"cp5"}, nil),
		stoppedVerdict("cp4", []string{"cp5"}, []Attempt{attempt(0, 5*ms, 200)}, nil, nil),
		holeVerdict("black hole", "x/v1/ys", "cp1", 65*time.Second, map[string]Attempt{}, noAudit),
		onlyGoneVerdict("cp1", "cp4", nil, 35*time.Second, time.Time{}, nil),
		forgedLeaseVerdict(forgedLeaseSeen{lease: "kube-apiserver-skewer-forged-1", entry: "cp1", node: "cp1"}),
		untrustedVerdict(untrustedSeen{fault: "untrusted serving cp4", key: "x/v1/ys", entry: "cp1", peer: "cp4"}, func() (string, time.Time, error) { return "", time.Time{}, nil }),
	} {
		if v.Outcome != promise.Fail || !strings.HasPrefix(v.Reason, "nothing observed") {
			t.Errorf("%s on no request: %s %q, want a failure, nothing observed", v.ID, v.Outcome, v.Reason)
		}
	}
}
