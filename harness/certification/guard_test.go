package certification

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/guard"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// halted is a rollout with a breach on purpose that its guard halted
// after it started a node, none of the control planes there before it
// touched.
func halted() *Halt {
	breach := &report.GuardSignal{Signal: guard.SignalForwarded, Requests: 6, Value: "4/6 (66.7%)", Threshold: "<= 1%", Decision: report.GuardBreach}
	return &Halt{
		Injection: "every older apiserver's link to cp5 black-holed",
		Members:   []string{"cp1", "cp2", "cp5"},
		Steps: []rollout.Step{{Name: "set ClusterConfiguration kubernetesVersion to v1.36.3"},
			{Name: "start a v1.36.3 control-plane node to replace cp2", Node: "cp6"}},
		Ended: &rollout.Halted{After: "start a v1.36.3 control-plane node to replace cp2", Breach: errors.New("forwarded-failures")},
		Table: report.GuardedRollout{Rollout: "resumed", Injected: "black hole", Halted: breach, HaltedAfter: "start a v1.36.3 control-plane node to replace cp2"},
	}
}

// quietTable is a guarded rollout that decided every signal ok once.
func quietTable(name string) report.GuardedRollout {
	var signals []report.GuardSignal
	for _, s := range []string{guard.SignalForwarded, guard.Signal5xx, guard.SignalFalse404, guard.SignalAddedP99} {
		signals = append(signals, report.GuardSignal{Signal: s, Requests: 120, Value: "0/120", Threshold: "<= 1%", Decision: report.GuardOK})
	}
	signals = append(signals, report.GuardSignal{Signal: guard.SignalDiscovery, Requests: 8, Value: "4 apiservers agree after 0.3s (cp6 joined)",
		Threshold: "<= 30s", Decision: report.GuardOK})
	return report.GuardedRollout{Rollout: name, Steps: []report.GuardStep{{Step: "join", Signals: signals}}}
}

// converged is what guards read of discovery after steps steps, changed
// of them changing the apiservers.
func converged(steps, changed int) guard.Totals {
	return guard.Totals{Converged: steps, Changed: changed, Slowest: 300 * time.Millisecond}
}

func TestJudgeDiscoverySteps(t *testing.T) {
	tables := []report.GuardedRollout{halted().Table, quietTable("roll back"), quietTable("through")}
	if v := JudgeDiscoverySteps(tables, converged(2, 2), promise.DefaultGuard); v.Outcome != promise.Pass ||
		!strings.Contains(v.Evidence[0], "after each of 2 steps") || !strings.Contains(v.Evidence[0], "2 of those steps changed") {
		t.Errorf("discovery agreed after both steps, each a join: %s %v (%s)", v.Outcome, v.Evidence, v.Reason)
	}
	stale := quietTable("through")
	stale.Steps[0].Signals[4].Decision, stale.Steps[0].Signals[4].Value = report.GuardBreach, "timed out after 30s: cp1 still advertises g/v1/things"
	unread := quietTable("through")
	unread.Steps[0].Signals[4].Decision = report.GuardNA
	for what, tc := range map[string]struct {
		tables []report.GuardedRollout
		read   guard.Totals
		want   promise.Outcome
	}{
		"stale past the bound":      {[]report.GuardedRollout{stale}, converged(0, 0), promise.Fail},
		"not read after a step":     {[]report.GuardedRollout{unread}, converged(0, 0), promise.Error},
		"no apiserver came or went": {[]report.GuardedRollout{quietTable("through")}, converged(1, 0), promise.Error},
		"no guarded rollout":        {[]report.GuardedRollout{halted().Table}, converged(0, 0), promise.Error},
		"counted short":             {[]report.GuardedRollout{quietTable("a"), quietTable("b")}, converged(1, 1), promise.Error},
	} {
		if v := JudgeDiscoverySteps(tc.tables, tc.read, promise.DefaultGuard); v.Outcome != tc.want {
			t.Errorf("%s: %s (%s), want %s", what, v.Outcome, v.Reason, tc.want)
		}
	}
}

func TestJudgeHalts(t *testing.T) {
	if v := JudgeHalts(halted(), nil); v.Outcome != promise.Pass || !strings.Contains(strings.Join(v.Evidence, "\n"), "4/6") {
		t.Errorf("halted before any older control plane went, then rolled back: %+v", v)
	}
	notHalted := halted()
	notHalted.Ended = nil
	unmade := halted()
	unmade.Unmade = errors.New("iptables: not found")
	for what, tc := range map[string]struct {
		h    *Halt
		back error
		want promise.Outcome
	}{
		"no such rollout":     {nil, nil, promise.Error},
		"no breach made":      {unmade, nil, promise.Error},
		"never halted":        {notHalted, nil, promise.Fail},
		"not rolled all back": {halted(), errors.New("not at v1.35.4: cp1 at v1.36.3"), promise.Fail},
	} {
		if v := JudgeHalts(tc.h, tc.back); v.Outcome != tc.want {
			t.Errorf("%s: %s (%s), want %s", what, v.Outcome, v.Reason, tc.want)
		}
	}
}

func TestJudgeQuiet(t *testing.T) {
	injected := halted().Table
	if v := JudgeQuiet([]report.GuardedRollout{injected, quietTable("roll back"), quietTable("through")}); v.Outcome != promise.Pass {
		t.Errorf("healthy rollouts not halted, the one with a breach on purpose halted: %s (%s)", v.Outcome, v.Reason)
	}
	undecided := quietTable("through")
	for i := range undecided.Steps[0].Signals {
		undecided.Steps[0].Signals[i].Decision = report.GuardPending
	}
	noForwarded := quietTable("through")
	noForwarded.Steps[0].Signals[0].Decision = report.GuardPending
	for what, tables := range map[string][]report.GuardedRollout{
		"no guarded rollout":            nil,
		"only the breach on purpose":    {injected},
		"nothing decided":               {undecided},
		"forwarded requests, undecided": {noForwarded},
	} {
		if v := JudgeQuiet(tables); v.Outcome != promise.Error {
			t.Errorf("%s: %s (%s), want error: a guard that decided nothing proved nothing", what, v.Outcome, v.Reason)
		}
	}
}

// forwardedTotals are n forwarded requests, failed of them unanswered,
// the answered taking fwd, and n served locally taking local.
func forwardedTotals(n, failed int, fwd, local time.Duration) guard.Totals {
	return guard.Totals{Forwarded: n, Failed: failed,
		ForwardedLatencies: slices.Repeat([]time.Duration{fwd}, n-failed), LocalLatencies: slices.Repeat([]time.Duration{local}, n)}
}

func TestJudgeObjective(t *testing.T) {
	ok := forwardedTotals(380, 1, 30*time.Millisecond, 20*time.Millisecond)
	if v := JudgeObjective(ok, promise.DefaultGuard, true); v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "1 of 380 forwarded requests failed (0.26%") {
		t.Errorf("1 of 380 failed, 10 ms added: %s %v (%s)", v.Outcome, v.Evidence, v.Reason)
	}
	for what, tc := range map[string]struct {
		t      guard.Totals
		probed bool
		want   promise.Outcome
	}{
		"2% failed":                      {forwardedTotals(200, 4, 30*time.Millisecond, 20*time.Millisecond), true, promise.Fail},
		"1.5 s added":                    {forwardedTotals(200, 0, 1600*time.Millisecond, 100*time.Millisecond), true, promise.Fail},
		"99 forwarded":                   {forwardedTotals(99, 0, 30*time.Millisecond, 20*time.Millisecond), true, promise.Error},
		"40% failed, too few for a p99":  {forwardedTotals(150, 60, 30*time.Millisecond, 20*time.Millisecond), true, promise.Fail},
		"too few local for a p99":        {guard.Totals{Forwarded: 150, ForwardedLatencies: slices.Repeat([]time.Duration{time.Millisecond}, 150)}, true, promise.Error},
		"nothing to forward in the pair": {guard.Totals{}, false, promise.NotApplicable},
	} {
		if v := JudgeObjective(tc.t, promise.DefaultGuard, tc.probed); v.Outcome != tc.want {
			t.Errorf("%s: %s (%s), want %s", what, v.Outcome, v.Reason, tc.want)
		}
	}
}
