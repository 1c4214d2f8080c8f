package certification

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// Every registered check judges promises of the catalogue in some part,
// and a promise of a strategy is judged by one check per part.
func TestChecksAreRegisteredWhole(t *testing.T) {
	for i, c := range checks {
		if len(c.IDs) == 0 || len(c.In) == 0 || c.Judge == nil {
			t.Errorf("check %d (%v): IDs, parts and a Judge are all needed", i, c.IDs)
		}
		for _, id := range slices.Concat(c.IDs, c.Also) {
			if _, ok := promise.Lookup(id); !ok {
				t.Errorf("check %d judges %q, not a promise of the catalogue", i, id)
			}
		}
		if c.Phase != nil && c.In[0].atOnce() > 1 {
			t.Errorf("check %d (%v) is a phase of its own in a part whose checks run together", i, c.IDs)
		}
		if c.Phase != nil && len(c.In) != 1 {
			t.Errorf("check %d (%v) is a phase of its own in %d parts: one phase, one part", i, c.IDs, len(c.In))
		}
	}
	for _, s := range []rollout.Strategy{rollout.StrategySurge, rollout.StrategyInPlace} {
		for p := partRefused; p <= partRun; p++ {
			seen := map[promise.ID]bool{}
			for _, c := range input(t).checksIn(p, s) {
				for _, id := range c.IDs {
					if seen[id] {
						t.Errorf("%s, part %d: %s is judged by two checks", s, p, id)
					}
					seen[id] = true
				}
			}
		}
	}
}

// A part runs only the checks the selection wants, and a selected check
// makes the run take its first part.
func TestPartsRunTheSelectedChecks(t *testing.T) {
	in := input(t)
	in.Only = []promise.ID{"proxy.fault.black-hole"}
	got := in.checksIn(partFaults, rollout.StrategySurge)
	if len(got) != 1 || got[0].IDs[0] != "proxy.fault.black-hole" {
		t.Errorf("faults with --only proxy.fault.black-hole: %d checks, want the link's alone", len(got))
	}
	in.Only = []promise.ID{"rollout.membership"}
	if !in.needs(partThrough, rollout.StrategySurge) || in.needs(partWindow, rollout.StrategySurge) {
		t.Error("rollout.membership asks for the rollout through, and for no window")
	}
	if len(in.checksIn(partWindow, rollout.StrategySurge)) != 1 {
		t.Error("rollout.membership is judged in the window when the window is taken anyway")
	}
	in.Only = []promise.ID{"sidecar.start.order"}
	if in.needs(partSidecars, rollout.StrategyInPlace) || !in.needs(partSidecars, rollout.StrategySurge) {
		t.Error("sidecar.start.order is the surge run's: the in-place run judges the Jobs alone")
	}
	if got := in.checksIn(partSidecars, rollout.StrategySurge); len(got) != 1 {
		t.Errorf("--only sidecar.start.order runs %d sidecar checks, want its own alone", len(got))
	}
	in.Only = []promise.ID{"sidecar.worker-replaced"}
	if !in.sidecars(rollout.StrategySurge) || len(in.checksIn(partSidecars, rollout.StrategySurge)) != 0 {
		t.Error("the worker's replacement takes the sidecar phase, and no other sidecar check")
	}
}

// A check that gives a verdict on a promise it does not declare is at
// fault: that verdict is an error, never the pass it claims.
func TestAJudgeJudgesOnlyItsOwn(t *testing.T) {
	r := &run{in: input(t), out: io.Discard}
	c := &Check{IDs: []promise.ID{"rollout.versions"}, In: []Part{partThrough}, Judge: func(context.Context, *Env) []promise.Verdict {
		return []promise.Verdict{{ID: "rollout.versions", Outcome: promise.Pass}, {ID: "rollout.membership", Outcome: promise.Pass}}
	}}
	r.judgeCheck(context.Background(), c, &Env{})
	if got := r.verdicts["rollout.membership"]; got.Outcome != promise.Error {
		t.Errorf("an undeclared verdict kept as %+v", got)
	}
	c.Also = []promise.ID{"proxy.audit.complete"}
	c.Judge = func(context.Context, *Env) []promise.Verdict {
		return []promise.Verdict{{ID: "proxy.audit.complete", Outcome: promise.Pass}}
	}
	r.judgeCheck(context.Background(), c, &Env{})
	if got := r.verdicts["proxy.audit.complete"]; got.Outcome != promise.Pass {
		t.Errorf("a verdict the check judges in passing (Also): %+v", got)
	}
	if got := r.verdicts["rollout.versions"]; got.Outcome != promise.Pass {
		t.Errorf("the declared verdict: %+v", got)
	}
}

// Checks run together inside a phase are its steps, each timed, and each
// says it is done as it ends, k of N: their verdicts come only at the end.
func TestChecksAreStepsOfTheirPhase(t *testing.T) {
	var out bytes.Buffer
	r := &run{in: input(t), strategy: rollout.StrategySurge, out: &out, current: "native sidecars"}
	check := func(id promise.ID, d time.Duration) *Check {
		return &Check{IDs: []promise.ID{id}, In: []Part{partSidecars}, Judge: func(context.Context, *Env) []promise.Verdict {
			time.Sleep(d)
			return []promise.Verdict{{ID: id, Outcome: promise.Pass}}
		}}
	}
	r.judgeTogether(context.Background(), []*Check{check("sidecar.start.order", 60*time.Millisecond), check("sidecar.job.completes", 10*time.Millisecond)}, &Env{}, 2)
	steps := r.stepsOf("native sidecars")
	if len(steps) != 2 {
		t.Fatalf("%d steps, want one per check: %+v", len(steps), steps)
	}
	for _, s := range steps {
		if !strings.HasPrefix(s.Name, "judge sidecar.") || s.End.Sub(s.Start) < 10*time.Millisecond {
			t.Errorf("step %+v: want the check named and timed", s)
		}
	}
	if i, j := strings.Index(out.String(), "1 of 2: sidecar.job.completes judged"), strings.Index(out.String(), "2 of 2: sidecar.start.order judged"); i < 0 || j < i {
		t.Errorf("each check says it is done as it ends, the shorter first, and how many of the phase's are:\n%s", out.String())
	}
	if len(r.stepsOf("another phase")) != 0 {
		t.Error("a phase's steps are its own")
	}
}

// A restart monitor that never started saw nothing: its promises are
// errors, not passes over an empty record.
func TestNoMonitorNoRestartVerdicts(t *testing.T) {
	got := judgeRestarts(context.Background(), &Env{})
	if len(got) != len(restartPromises) {
		t.Fatalf("%d verdicts for %d promises", len(got), len(restartPromises))
	}
	for _, v := range got {
		if v.Outcome != promise.Error {
			t.Errorf("%s without a monitor: %s", v.ID, v.Outcome)
		}
	}
}

// A phase that runs on says so every heartbeatEvery, naming itself, and
// says nothing more once it has ended.
func TestPhasesHeartbeat(t *testing.T) {
	defer func(d time.Duration) { heartbeatEvery = d }(heartbeatEvery)
	heartbeatEvery = 20 * time.Millisecond
	var out bytes.Buffer
	r := &run{in: input(t), strategy: rollout.StrategySurge, out: &out}
	if err := r.phase(context.Background(), "native sidecars", func(context.Context) error {
		time.Sleep(110 * time.Millisecond)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := strings.Count(out.String(), "[surge] ... native sidecars: ")
	if n < 2 {
		t.Errorf("%d heartbeats in a phase of five intervals: %q", n, out.String())
	}
	ended := out.Len()
	time.Sleep(3 * heartbeatEvery)
	if out.Len() != ended {
		t.Errorf("a heartbeat after the phase ended: %q", out.String()[ended:])
	}
}
