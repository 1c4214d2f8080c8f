package certification

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

func input(t *testing.T) Input {
	t.Helper()
	pair, err := certify.ParsePair("v1.35.4", "v1.36.3")
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
		{"an unknown promise", func(in *Input) { in.Skip = []certify.ID{"rollout.nope"} }, `"rollout.nope" is not a promise`},
		{"a single control plane", func(in *Input) { in.Profile.ControlPlanes = 1 }, "needs 3"},
		{"no images", func(in *Input) { in.Images = nil }, "image resolver"},
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
	in.Waivers = certify.Waivers{"rollout.membership": {ID: "rollout.membership", Observed: "x", Reason: "y", Reference: "https://example.org/z"}}
	r := &run{in: in, out: io.Discard}
	pass := func(ev string) certify.Verdict {
		return certify.Verdict{ID: "rollout.versions", Outcome: certify.Pass, Evidence: []string{ev}}
	}
	r.judge(pass("after one"))
	r.judge(pass("after two"))
	if got := r.verdicts["rollout.versions"]; got.Outcome != certify.Pass || len(got.Evidence) != 2 {
		t.Errorf("two passes: %+v", got)
	}
	r.judge(certify.Verdict{ID: "rollout.versions", Outcome: certify.Fail, Reason: "one at v1.35.4"})
	r.judge(pass("after three"))
	if got := r.verdicts["rollout.versions"]; got.Outcome != certify.Fail || got.Reason != "one at v1.35.4" {
		t.Errorf("a failure then a pass: %+v", got)
	}
	r.judge(certify.Verdict{ID: "rollout.membership", Outcome: certify.Fail, Reason: "an extra etcd member"})
	if got := r.verdicts["rollout.membership"]; got.Outcome != certify.Waived {
		t.Errorf("a waived failure: %+v", got)
	}
	r.in.Strict = true
	r.judge(certify.Verdict{ID: "rollout.membership", Outcome: certify.Fail, Reason: "an extra etcd member"})
	if got := r.verdicts["rollout.membership"]; got.Outcome != certify.Fail {
		t.Errorf("strict: %+v", got)
	}
}

// A check that fails once the run was interrupted was cut short, not
// failed: skipped, with what it said kept as evidence. What failed
// before the interrupt stays failed, and a pass stays a pass.
func TestInterruptedChecksAreSkipped(t *testing.T) {
	stopped := false
	r := &run{in: input(t), out: io.Discard, cutShort: func() bool { return stopped }}
	r.judge(certify.Verdict{ID: "rollout.versions", Outcome: certify.Fail, Reason: "one at v1.35.4"})
	r.judge(certify.Verdict{ID: "rollout.membership", Outcome: certify.Pass, Evidence: []string{"three members"}})
	stopped = true
	r.judge(certify.Verdict{ID: "rollout.versions", Outcome: certify.Fail, Reason: "context canceled"})
	r.judge(certify.Verdict{ID: "rollout.membership", Outcome: certify.Fail, Reason: "context canceled"})
	r.judge(certify.Verdict{ID: "mvp.route.verbs", Outcome: certify.Fail, Reason: "context canceled"})
	if got := r.verdicts["rollout.versions"]; got.Outcome != certify.Fail || got.Reason != "one at v1.35.4" {
		t.Errorf("failed before the interrupt: %+v", got)
	}
	if got := r.verdicts["rollout.membership"]; got.Outcome != certify.Pass {
		t.Errorf("passed before the interrupt: %+v", got)
	}
	got := r.verdicts["mvp.route.verbs"]
	if got.Outcome != certify.Skipped || !strings.Contains(got.Reason, "interrupted") || !slices.Contains(got.Evidence, "cut short: context canceled") {
		t.Errorf("cut short: %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
}

// A run with nothing selected makes no cluster and skips every promise
// with its reason; the results still validate. Every promise is left out
// by --skip but one that no run judges (--only): found, not named -
// naming one that a later change made certify judge would start a real
// certification. When certify judges them all, --only names none.
func TestNothingSelectedMakesNoCluster(t *testing.T) {
	in := input(t)
	var unjudged certify.ID
	for _, p := range certify.Catalogue() {
		judged := false
		for _, ids := range checkedBy {
			judged = judged || slices.Contains(ids, p.ID)
		}
		if judged {
			in.Skip = append(in.Skip, p.ID)
		} else if unjudged == "" {
			unjudged = p.ID
		}
	}
	res := report.New(in.Pair, report.Tool{Version: "test", Go: "go", Kind: "v0"}, t0())
	for _, s := range in.Strategies {
		r := &run{in: in, strategy: s, out: io.Discard}
		r.judgeAll(context.Background())
		if r.c != nil || len(r.phases) != 0 {
			t.Fatalf("%s: a run with nothing to judge made a cluster or ran phases: %v", s, r.phases)
		}
		res.Runs = append(res.Runs, r.result())
	}
	if err := res.Finish(t0()); err != nil {
		t.Fatal(err)
	}
	if c := res.Counts(); c[certify.Skipped] != 2*len(certify.Catalogue()) {
		t.Errorf("counts %v", c)
	}
	for _, p := range res.Runs[0].Promises {
		if p.ID == unjudged && !strings.Contains(p.Reason, "not checked yet") {
			t.Errorf("judged by no run: %q", p.Reason)
		}
		if p.ID == "rollout.versions" && p.Reason != "left out by --skip" {
			t.Errorf("skipped: %q", p.Reason)
		}
	}
}

func t0() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }

// A waiver for a cause no check gives would never apply: every cause the
// repository's waivers name is one a check reports.
func TestWaiversNameCausesChecksGive(t *testing.T) {
	given := map[string]bool{CauseNoCapablePeer: true, CauseServerWentDown: true, CausePeerCacheRebuilt: true, CauseTransportUncounted: true,
		restarts.CauseStuckOnOneAPIServer: true, traffic.CauseAuthorizerNotSynced: true}
	ws, err := certify.LoadWaivers(filepath.Join("..", "..", certify.UpstreamFile))
	if err != nil {
		t.Fatal(err)
	}
	for id, w := range ws {
		if w.Cause != "" && !given[w.Cause] {
			t.Errorf("the waiver of %s names the cause %q, which no check gives", id, w.Cause)
		}
	}
}
