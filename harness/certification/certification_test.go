package certification

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

func input(t *testing.T) Input {
	t.Helper()
	pair, err := promise.ParsePair("v1.35.4", "v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	return Input{Pair: pair, Strategies: []rollout.Strategy{rollout.StrategySurge, rollout.StrategyInPlace},
		Profile: &cluster.Spec{Name: "ha", ControlPlanes: 3, Workers: 1}, Name: "skewer-certify",
		Images: &nodeimage.Resolver{}, Out: io.Discard}
}

func TestValidate(t *testing.T) {
	if err := input(t).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"no strategy", func(in *Input) { in.Strategies = nil }, "no strategy"},
		{"an unknown promise", func(in *Input) { in.Skip = []promise.ID{"rollout.nope"} }, `"rollout.nope" is not a promise`},
		{"a single control plane", func(in *Input) { in.Profile.ControlPlanes = 1 }, "needs 3"},
		{"no images", func(in *Input) { in.Images = nil }, "image resolver"},
		// A selection no chosen run judges would pass on nothing.
		{"a surge-only promise in place", func(in *Input) {
			in.Strategies, in.Only = []rollout.Strategy{rollout.StrategyInPlace}, []promise.ID{"proxy.route.verbs"}
		}, "the selection leaves nothing to judge: the in-place run judges none of it"},
	} {
		in := input(t)
		tc.edit(&in)
		if err := in.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Verdicts for one promise merge to the worst: a failure stays, a waiver
// outweighs a pass, passes gather their evidence.
func TestJudgeMerges(t *testing.T) {
	in := input(t)
	in.Waivers = promise.Waivers{"rollout.membership": {ID: "rollout.membership", Cause: "c", Versions: []string{"1.35", "1.36"},
		Observed: "x", Reason: "y", Reference: "https://example.org/z"}}.For(in.Pair.From, in.Pair.To)
	r := &run{in: in, out: io.Discard}
	pass := func(ev string) promise.Verdict {
		return promise.Verdict{ID: "rollout.versions", Outcome: promise.Pass, Evidence: []string{ev}}
	}
	r.judge(pass("after one"))
	r.judge(pass("after two"))
	if got := r.verdicts["rollout.versions"]; got.Outcome != promise.Pass || len(got.Evidence) != 2 {
		t.Errorf("two passes: %+v", got)
	}
	r.judge(promise.Verdict{ID: "rollout.versions", Outcome: promise.Fail, Reason: "one at v1.35.4"})
	r.judge(pass("after three"))
	if got := r.verdicts["rollout.versions"]; got.Outcome != promise.Fail || got.Reason != "one at v1.35.4" {
		t.Errorf("a failure then a pass: %+v", got)
	}
	r.judge(promise.Verdict{ID: "rollout.membership", Outcome: promise.Fail, Reason: "an extra etcd member", Causes: []string{"c"}})
	if got := r.verdicts["rollout.membership"]; got.Outcome != promise.Waived {
		t.Errorf("a waived failure: %+v", got)
	}
	r.in.Strict = true
	r.judge(promise.Verdict{ID: "rollout.membership", Outcome: promise.Fail, Reason: "an extra etcd member", Causes: []string{"c"}})
	if got := r.verdicts["rollout.membership"]; got.Outcome != promise.Fail {
		t.Errorf("strict: %+v", got)
	}
}

// A check that fails once the run was interrupted was cut short, not
// failed: an error (it could not run), with what it said kept as
// evidence. What failed before the interrupt stays failed, and a pass
// stays a pass.
func TestInterruptedChecksAreErrors(t *testing.T) {
	stopped := false
	r := &run{in: input(t), out: io.Discard, cutShort: func() bool { return stopped }}
	r.judge(promise.Verdict{ID: "rollout.versions", Outcome: promise.Fail, Reason: "one at v1.35.4"})
	r.judge(promise.Verdict{ID: "rollout.membership", Outcome: promise.Pass, Evidence: []string{"three members"}})
	stopped = true
	r.judge(promise.Verdict{ID: "rollout.versions", Outcome: promise.Fail, Reason: "context canceled"})
	r.judge(promise.Verdict{ID: "rollout.membership", Outcome: promise.Fail, Reason: "context canceled"})
	r.judge(promise.Verdict{ID: "proxy.route.verbs", Outcome: promise.Fail, Reason: "context canceled"})
	if got := r.verdicts["rollout.versions"]; got.Outcome != promise.Fail || got.Reason != "one at v1.35.4" {
		t.Errorf("failed before the interrupt: %+v", got)
	}
	if got := r.verdicts["rollout.membership"]; got.Outcome != promise.Pass {
		t.Errorf("passed before the interrupt: %+v", got)
	}
	got := r.verdicts["proxy.route.verbs"]
	if got.Outcome != promise.Error || !strings.Contains(got.Reason, "interrupted") || !slices.Contains(got.Evidence, "cut short: context canceled") {
		t.Errorf("cut short: %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
}

// A run with nothing selected makes no cluster and says of every
// promise that it was not selected; the results still validate, and
// their coverage says nothing was judged.
func TestNothingSelectedMakesNoCluster(t *testing.T) {
	in := input(t)
	for _, p := range promise.Catalogue() {
		in.Skip = append(in.Skip, p.ID)
	}
	res := report.New(in.Pair, report.Tool{Version: "test", Go: "go", Kind: "v0"}, t0())
	for _, s := range in.Strategies {
		r := &run{in: in, strategy: s, out: io.Discard}
		r.judgeAll(context.Background(), func(report.Run, string) { t.Error("a run that judged nothing kept results") })
		if r.c != nil || len(r.phases) != 0 {
			t.Fatalf("%s: a run with nothing to judge made a cluster or ran phases: %v", s, r.phases)
		}
		res.Runs = append(res.Runs, r.result())
	}
	if err := res.Finish(t0()); err != nil {
		t.Fatal(err)
	}
	if c := res.Counts(); c[promise.NotSelected] != 2*len(promise.Catalogue()) {
		t.Errorf("counts %v", c)
	}
	if res.Coverage.Judged != 0 || !strings.Contains(res.Headline(), "PASS, judged 0 of 76 promises; not judged: cluster 2 of 2, proxy 31 of 31") {
		t.Errorf("coverage of a run that judged nothing: %s", res.Headline())
	}
	for _, p := range res.Runs[0].Promises {
		if p.ID == "rollout.versions" && p.Reason != "left out by --skip" {
			t.Errorf("not selected: %q", p.Reason)
		}
	}
}

// Evidence not exported or a cluster not deleted is said, not dropped:
// each is a phase of the timeline with its error, and the run's clean-up
// error names it, so the exit status is not 0 (issue 36).
func TestCleanUpFailuresAreSaid(t *testing.T) {
	in := input(t)
	in.Evidence = t.TempDir()
	ok := func(context.Context) error { return nil }
	exported := func(context.Context, string) error { return nil }
	for _, tc := range []struct {
		name   string
		export func(context.Context, string) error
		remove func(context.Context) error
		want   []string
	}{
		{"both done", exported, ok, nil},
		{"nothing to do", nil, nil, nil},
		{"the export failed", func(context.Context, string) error { return errors.New("no space left on device") }, ok,
			[]string{"export the evidence", "no space left on device"}},
		{"the delete failed", exported, func(context.Context) error { return errors.New("container still running") },
			[]string{"delete the cluster", "container still running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &run{in: in, strategy: rollout.StrategySurge, out: io.Discard}
			err := r.cleanUp(context.Background(), tc.export, tc.remove)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("a clean-up that did its work failed: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("a failed clean-up returned no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
			failed := 0
			for _, p := range r.phases {
				if p.Error != "" {
					failed++
				}
			}
			if failed != 1 {
				t.Errorf("%d phases of the timeline carry an error, want 1: %+v", failed, r.phases)
			}
		})
	}
}

// Every promise of the catalogue is judged by some strategy's run: one
// that none judges would be an error in every certification.
func TestEveryPromiseHasARun(t *testing.T) {
	for _, p := range promise.Catalogue() {
		if !slices.Contains(checkedBy(rollout.StrategySurge), p.ID) {
			t.Errorf("%s: no run of certify judges it", p.ID)
		}
	}
	if v := notJudged("rollout.nope", rollout.StrategyInPlace); v.Outcome != promise.Error {
		t.Errorf("a promise no run judges: %+v", v)
	}
}

// A promise --only or --skip left out is not selected whatever its
// check said: a failure there neither counts nor fails the run.
func TestUnselectedVerdictsDoNotCount(t *testing.T) {
	in := input(t)
	in.Only = []promise.ID{"rollout.versions"}
	r := &run{in: in, out: io.Discard}
	r.judge(promise.Verdict{ID: "rollout.membership", Outcome: promise.Fail, Reason: "an extra etcd member"})
	r.judge(promise.Verdict{ID: "rollout.versions", Outcome: promise.Pass})
	if got := r.verdicts["rollout.membership"]; got.Outcome != promise.NotSelected || got.Reason != "not among --only" {
		t.Errorf("an unselected failure: %+v", got)
	}
	if err := promise.Failed([]promise.Verdict{r.verdicts["rollout.membership"], r.verdicts["rollout.versions"]}); err != nil {
		t.Errorf("an unselected failure failed the run: %v", err)
	}
}

// A mixed window that cannot be opened makes its promises errors, unless
// the pair offers nothing to route: only then do they not apply.
func TestNoWindow(t *testing.T) {
	if v := noWindow("proxy.route.verbs", fmt.Errorf("%w: v1.36.3 serves no routable resource", ErrNothingToRoute)); v.Outcome != promise.NotApplicable {
		t.Errorf("nothing to route: %+v", v)
	}
	if v := noWindow("proxy.route.verbs", errors.New("the server is currently unable to handle the request")); v.Outcome != promise.Error || !strings.Contains(v.Reason, "unable to handle") {
		t.Errorf("an API error: %+v", v)
	}
}

func t0() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }

// A waiver for a cause no check gives would never apply: every cause the
// repository's waivers name is one a check reports.
func TestWaiversNameCausesChecksGive(t *testing.T) {
	given := map[string]bool{CauseNoCapablePeer: true, CauseServerWentDown: true, CausePeerCacheRebuilt: true, CauseTransportUncounted: true,
		restarts.CauseStuckOnOneAPIServer: true, restarts.CauseRuntimeCannotFreeze: true, traffic.CauseAuthorizerNotSynced: true, CauseReverseProxyAbort: true, CauseTimeoutAbort: true}
	ws, err := promise.LoadWaivers(filepath.Join("..", "..", promise.UpstreamFile))
	if err != nil {
		t.Fatal(err)
	}
	for id, w := range ws {
		if !given[w.Cause] {
			t.Errorf("the waiver of %s names the cause %q, which no check gives", id, w.Cause)
		}
	}
}

// docs/promises.md is what the code says; UPDATE=1 writes it again.
func TestPromisesDoc(t *testing.T) {
	ws, err := promise.LoadWaivers(filepath.Join("..", "..", promise.UpstreamFile))
	if err != nil {
		t.Fatal(err)
	}
	want := PromisesDoc(ws)
	path := filepath.Join("..", "..", "docs", "promises.md")
	if os.Getenv("UPDATE") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Errorf("docs/promises.md differs from the code (%v): UPDATE=1 go test ./harness/certification -run TestPromisesDoc", err)
	}
}

// The surge run does only what the selected promises need: everything
// when all are selected; the mixed window alone for the proxy's routing;
// the window and the rollback for a rollback promise; no window and no
// traffic for the sidecars.
func TestSurgePlan(t *testing.T) {
	in := input(t)
	all := in.surgePlan()
	if all != (surgePlan{true, true, true, true, true, true, true, true, true, true, true, true}) {
		t.Errorf("every promise selected: %+v", all)
	}
	for _, tc := range []struct {
		only []promise.ID
		want surgePlan
	}{
		{[]promise.ID{"proxy.route.verbs", "proxy.audit.complete"}, surgePlan{window: true, proxy: true}},
		{[]promise.ID{"proxy.fault.black-hole"}, surgePlan{window: true, faults: true}},
		{[]promise.ID{"proxy.route.runtime-config"}, surgePlan{window: true, variant: true}},
		{[]promise.ID{"rollout.rollback"}, surgePlan{window: true, rollback: true}},
		{[]promise.ID{"proxy.fault.peer-stopped"}, surgePlan{window: true, rollback: true, windowTwo: true}},
		{[]promise.ID{"proxy.fault.peer-killed"}, surgePlan{window: true, faults: true, rollback: true, windowTwo: true}},
		{[]promise.ID{"sidecar.start.order"}, surgePlan{through: true, sidecars: true}},
		{[]promise.ID{"proxy.route.verbs", "rollout.versions"}, surgePlan{window: true, proxy: true, rollback: true, through: true}},
		{[]promise.ID{"rollout.no-lost-writes"}, surgePlan{traffic: true, through: true}},
		{[]promise.ID{"rollout.refuses-bad-input"}, surgePlan{refused: true}},
		// The breach on purpose resumes the rollout from the window under
		// the traffic its guard reads; the rollback ends it.
		{[]promise.ID{"rollout.guard.halts"}, surgePlan{window: true, traffic: true, rollback: true, halts: true}},
	} {
		in.Only = tc.only
		if got := in.surgePlan(); got != tc.want {
			t.Errorf("--only %v: %+v, want %+v", tc.only, got, tc.want)
		}
	}
	// The shards of a certification split across machines: each runs what
	// its areas need, and the traffic, where judged, crosses every
	// transition the run in one piece makes.
	in.Only = nil
	for _, tc := range []struct {
		shard []string
		want  surgePlan
	}{
		{[]string{"proxy"}, surgePlan{window: true, proxy: true, faults: true, variant: true, rollback: true, windowTwo: true}},
		{[]string{"rollout"}, surgePlan{refused: true, interrupted: true, window: true, traffic: true, rollback: true, windowTwo: true, through: true, halts: true}},
		{[]string{"sidecar"}, surgePlan{through: true, sidecars: true}},
		{[]string{"proxy", "rollout", "sidecar"}, all},
	} {
		in.Shard = tc.shard
		if got := in.surgePlan(); got != tc.want {
			t.Errorf("--shard %v: %+v, want %+v", tc.shard, got, tc.want)
		}
	}
}

// The results kept before a run's evidence is exported and its cluster
// deleted (what a cancelled CI job still publishes) are incomplete while
// runs are still to come or when the run was interrupted, and the run's
// own verdict only when it was the last and ran through.
func TestCheckpoint(t *testing.T) {
	in := input(t)
	run := func(s rollout.Strategy, failing promise.ID) report.Run {
		r := &run{in: in, strategy: s, out: io.Discard}
		for _, p := range promise.Catalogue() {
			v := promise.Verdict{ID: p.ID, Outcome: promise.Pass}
			if p.ID == failing {
				v = promise.Verdict{ID: p.ID, Outcome: promise.Fail, Reason: "2 acknowledged writes missing"}
			}
			r.keep(v)
		}
		return r.result()
	}
	both := []rollout.Strategy{rollout.StrategySurge, rollout.StrategyInPlace}
	res := report.New(in.Pair, report.Tool{Version: "test", Go: "go", Kind: "v0"}, t0())
	first, err := checkpoint(res, run(rollout.StrategySurge, ""), both, 0, "", nil, t0().Add(time.Minute))
	if err != nil || first.Outcome != promise.Incomplete || !strings.Contains(first.Incomplete, "the in-place run was still to come") {
		t.Errorf("after the first of two runs: %v, %s %q", err, first.Outcome, first.Incomplete)
	}
	res.Runs = append(res.Runs, run(rollout.StrategySurge, ""))
	last, err := checkpoint(res, run(rollout.StrategyInPlace, "rollout.no-lost-writes"), both, 1, "", nil, t0().Add(2*time.Minute))
	if err != nil || last.Outcome != promise.Fail || last.Incomplete != "" || len(last.Runs) != 2 {
		t.Errorf("after the last run: %v, %s %q", err, last.Outcome, last.Incomplete)
	}
	cut, err := checkpoint(res, run(rollout.StrategyInPlace, ""), both, 1, "", context.Canceled, t0().Add(2*time.Minute))
	if err != nil || cut.Outcome != promise.Incomplete || !strings.Contains(cut.Incomplete, "interrupted in run 2 of 2 (context canceled)") {
		t.Errorf("interrupted: %v, %s %q", err, cut.Outcome, cut.Incomplete)
	}
	if len(res.Runs) != 1 {
		t.Errorf("a checkpoint changed the results it started from: %d runs", len(res.Runs))
	}
}

// After each phase of a run's transitions its results are kept as they
// stand: what was judged, the plan's own verdicts, and every other
// promise an error saying it was not judged yet - never a pass - so a run
// killed outright (SIGKILL at a CI job's timeout) leaves what it judged.
// The run's own verdicts are left as they are, and the results say the
// run went on.
func TestResultsAreKeptAfterEachPhase(t *testing.T) {
	in := input(t)
	in.Skip = []promise.ID{"sidecar.job.completes"}
	r := &run{in: in, strategy: rollout.StrategySurge, out: io.Discard, plan: Plan(in)[rollout.StrategySurge]}
	var kept []report.Run
	var after []string
	r.keepSoFar = func(run report.Run, phase string) { kept, after = append(kept, run), append(after, phase) }
	r.judge(promise.Verdict{ID: "rollout.versions", Outcome: promise.Fail, Reason: "one at v1.35.4"})
	if err := r.phase(context.Background(), "the mixed window: one control plane at v1.36.3", func(context.Context) error {
		r.judge(promise.Verdict{ID: "proxy.route.verbs", Outcome: promise.Pass})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || after[0] != "the mixed window: one control plane at v1.36.3" || len(kept[0].Phases) != 1 {
		t.Fatalf("kept %d times, after %q", len(kept), after)
	}
	got := map[promise.ID]promise.Verdict{}
	for _, p := range kept[0].Promises {
		got[p.ID] = p.Verdict
	}
	if len(got) != len(promise.Catalogue()) {
		t.Errorf("%d promises kept, want every one of %d", len(got), len(promise.Catalogue()))
	}
	if got["proxy.route.verbs"].Outcome != promise.Pass || got["rollout.versions"].Outcome != promise.Fail {
		t.Errorf("judged: %+v, %+v", got["proxy.route.verbs"], got["rollout.versions"])
	}
	if v := got["sidecar.job.completes"]; v.Outcome != promise.NotSelected {
		t.Errorf("skipped: %+v", v)
	}
	if v := got["proxy.audit.complete"]; v.Outcome != promise.Error || !strings.Contains(v.Reason, `not judged yet`) ||
		!strings.Contains(v.Reason, "the mixed window") {
		t.Errorf("not judged yet: %+v", v)
	}
	if len(r.verdicts) != 2 {
		t.Errorf("keeping the results judged %d promises of the run itself", len(r.verdicts))
	}
	res := report.New(in.Pair, report.Tool{Version: "test", Go: "go", Kind: "v0"}, t0())
	part, err := checkpoint(res, kept[0], []rollout.Strategy{rollout.StrategySurge}, 0, after[0], nil, t0().Add(time.Minute))
	if err != nil || part.Outcome != promise.Incomplete || !strings.Contains(part.Incomplete, `kept during run 1 of 1, after its phase "the mixed window`) {
		t.Errorf("kept during the run: %v, %s %q", err, part.Outcome, part.Incomplete)
	}
}
