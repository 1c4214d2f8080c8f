package report

import (
	"fmt"
	"strings"
)

// GuardedRollout is what the rollout guard decided after each step of one
// rollout.
type GuardedRollout struct {
	Rollout string `json:"rollout"`
	// Injected is the breach made on purpose before it, if one was.
	Injected string `json:"injected,omitempty"`
	// Halted is the breach that stopped it, if one did.
	Halted *GuardSignal `json:"halted,omitempty"`
	// HaltedAfter is the step it stopped after.
	HaltedAfter string      `json:"haltedAfter,omitempty"`
	Steps       []GuardStep `json:"steps"`
}

// Ended says how the rollout ended: halted, on which signal after which
// step, or not.
func (g GuardedRollout) Ended() string {
	if g.Halted == nil {
		return "not halted"
	}
	return fmt.Sprintf("halted after %q: %s %s, threshold %s", g.HaltedAfter, g.Halted.Signal, g.Halted.Value, g.Halted.Threshold)
}

// GuardStep is the guard's reading of every signal after one step.
type GuardStep struct {
	Step    string        `json:"step"`
	Signals []GuardSignal `json:"signals"`
}

// GuardSignal is one signal after one step.
type GuardSignal struct {
	Signal string `json:"signal"`
	// Requests is the sample the signal was read on: the step's, and
	// those of earlier steps too short to decide on.
	Requests  int    `json:"requests"`
	Value     string `json:"value"`
	Threshold string `json:"threshold"`
	// Decision is ok, breach, pending (too few requests: judged with the
	// next step's) or n/a (the signal has nothing to read in this run).
	Decision string `json:"decision"`
}

// Guard decisions.
const (
	GuardOK      = "ok"
	GuardBreach  = "breach"
	GuardPending = "pending"
	GuardNA      = "n/a"
)

// guardSummary is run's guarded rollouts for summary.md: a line each.
func guardSummary(run Run) string {
	if len(run.Guard) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Rollout guard (%s)\n\n| rollout | steps | ended | breach on purpose |\n|---|---|---|---|\n", run.Label())
	for _, g := range run.Guard {
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", cell(g.Rollout), len(g.Steps), cell(g.Ended()), cell(g.Injected))
	}
	return b.String()
}
