package suite

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/version"
)

// A step waiting on its ctx sees the suite's cancellation with its cause,
// and the cleanups it registered run when it returns.
func TestCancellingTheSuiteReachesTheRunningStep(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Suite{ctx: ctx}
	e, err := s.newEnv(envconf.New())
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var seen error
	reverted := false
	f := features.New("a step holding a fault").
		Assess("waits on its context", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			t.Cleanup(func() { reverted = true })
			close(started)
			select {
			case <-ctx.Done():
				seen = context.Cause(ctx)
			case <-time.After(5 * time.Second):
			}
			return ctx
		}).Feature()
	go func() {
		<-started
		cancel(errInterrupted)
	}()
	e.Test(t, f)
	if !errors.Is(seen, errInterrupted) {
		t.Fatalf("the step saw %v, want %v", seen, errInterrupted)
	}
	if !reverted {
		t.Fatal("the step's cleanup did not run")
	}
	if !s.Failed() {
		t.Fatal("a stopped suite does not count as failed: its evidence would not be exported")
	}
}

func TestATestAfterTheCancellationIsSkipped(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errDeadline)
	s := &Suite{ctx: ctx}
	e, err := s.newEnv(envconf.New())
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	f := features.New("later").
		Assess("would use the cluster", func(ctx context.Context, _ *testing.T, _ *envconf.Config) context.Context {
			ran = true
			return ctx
		}).Feature()
	var inner *testing.T
	t.Run("next", func(t *testing.T) {
		inner = t
		e.Test(t, f)
	})
	if ran || !inner.Skipped() {
		t.Fatalf("step ran: %v, test skipped: %v; want a skip and no step", ran, inner.Skipped())
	}
}

func TestListingAndDryRunMakeNoCluster(t *testing.T) {
	for _, tc := range []struct {
		name   string
		list   string
		dryRun bool
		short  bool
		want   plan
	}{
		{"a real run", "", false, false, withCluster},
		{"go test -list .", ".", false, false, listOnly},
		{"go test -list with -short still lists", "Test", false, true, listOnly},
		{"--dry-run", "", true, false, listOnly},
		{"--dry-run with -short", "", true, true, listOnly},
		{"-short", "", false, true, skipAll},
	} {
		if got := decide(tc.list, tc.dryRun, tc.short); got != tc.want {
			t.Errorf("%s: decide(%q, %v, %v) = %d, want %d", tc.name, tc.list, tc.dryRun, tc.short, got, tc.want)
		}
	}
}

func TestJudge(t *testing.T) {
	ws := promise.Waivers{"proxy.fault.only-peer-gone": {ID: "proxy.fault.only-peer-gone", Cause: "no-capable-peer", Versions: []string{"1.36"},
		Observed: "a 404", Reason: "upstream falls through", Reference: "https://github.com/kubernetes/kubernetes/blob/v1.36.3/x.go"}}.For(version.MustParse("v1.36.3"))
	fail := func(id promise.ID) promise.Verdict {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Reason: "saw a 404", Causes: []string{"no-capable-peer"}}
	}
	for _, tc := range []struct {
		name   string
		v      promise.Verdict
		strict bool
		want   promise.Outcome
		fails  bool
	}{
		{"a pass passes", promise.Verdict{ID: "proxy.route.verbs", Outcome: promise.Pass}, false, promise.Pass, false},
		{"a documented failure is waived", fail("proxy.fault.only-peer-gone"), false, promise.Waived, false},
		{"strict refuses the waiver", fail("proxy.fault.only-peer-gone"), true, promise.Fail, true},
		{"a failure without a waiver fails", fail("proxy.route.verbs"), false, promise.Fail, true},
		{"a promise outside the catalogue fails", promise.Verdict{ID: "proxy.finding", Outcome: promise.Pass}, false, promise.Pass, true},
		{"a failure that says nothing fails", promise.Verdict{ID: "proxy.route.verbs", Outcome: promise.Fail}, false, promise.Fail, true},
		{"a check that could not run fails", promise.Verdict{ID: "proxy.route.verbs", Outcome: promise.Error, Reason: "no window"}, false, promise.Error, true},
		{"a promise that does not apply does not fail", promise.Verdict{ID: "proxy.route.verbs", Outcome: promise.NotApplicable, Reason: "rule"}, false, promise.NotApplicable, false},
	} {
		got, err := judge(ws, tc.strict, tc.v)
		if got.Outcome != tc.want || (err != nil) != tc.fails {
			t.Errorf("%s: got %s, err %v", tc.name, got.Outcome, err)
		}
	}
}
