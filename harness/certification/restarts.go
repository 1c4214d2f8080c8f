package certification

import (
	"context"
	"fmt"
	"slices"

	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

// Meaning is what a phase means to restart: what Words name
// (restarts.ControlPlane where a rollout acted or a fault killed a
// control-plane component, a container's name where a check crashes it
// on purpose), on Nodes when it names them (a fault's node), else on any
// node. Where the phase ran rollouts, their steps replace the phase for
// restarts.ControlPlane: each step means the control plane's restarts on
// the node it acts on (any, for a step on the whole cluster), until the
// next step begins (stepSpans).
type Meaning struct {
	Words    []string
	Nodes    []string
	Rollouts []*rollout.Runner
}

// Meant says whether a step meant an event: one that happened within a
// phase or a rollout's step (or, for a check's own Pod, one made within
// the phase) that meant says is meant to restart what names the event,
// on its node.
func Meant(phases []report.Phase, meant map[string]*Meaning) func(restarts.Event) bool {
	var spans []restarts.Span
	for _, p := range phases {
		m := meant[p.Name]
		if m == nil {
			continue
		}
		words := m.Words
		if steps := stepSpans(p.Name, m.Rollouts); len(steps) > 0 && slices.Contains(words, restarts.ControlPlane) {
			words = slices.DeleteFunc(slices.Clone(words), func(w string) bool { return w == restarts.ControlPlane })
			spans = append(spans, steps...)
		}
		if len(words) > 0 {
			spans = append(spans, restarts.Span{Name: p.Name, Start: p.Start, End: p.End, Restarts: words, Nodes: m.Nodes})
		}
	}
	return restarts.Meant(spans)
}

// stepSpans are the spans in which the steps of rollouts mean the control
// plane's restarts: each on its node (any, for a step on the whole
// cluster), from its start to the next step's start - what a step did
// may show a moment after it returned (a killed container's exit
// recorded a second later), and the runner marks the traffic's phase
// between two steps - the last to its end.
func stepSpans(phase string, rollouts []*rollout.Runner) []restarts.Span {
	var spans []restarts.Span
	for _, r := range rollouts {
		for i, st := range r.Steps {
			end := st.Start.Add(st.Duration)
			if i+1 < len(r.Steps) {
				end = r.Steps[i+1].Start
			}
			span := restarts.Span{Name: phase + ": " + st.Name, Start: st.Start, End: end, Restarts: []string{restarts.ControlPlane}}
			if st.Node != "" {
				span.Nodes = []string{st.Node}
			}
			spans = append(spans, span)
		}
	}
	return spans
}

// restarting marks the current phase as one meant to restart what words
// name, and returns what it means.
func (r *run) restarting(words ...string) *Meaning {
	if r.restarts == nil {
		r.restarts = map[string]*Meaning{}
	}
	m := r.restarts[r.current]
	if m == nil {
		m = &Meaning{}
		r.restarts[r.current] = m
	}
	for _, w := range words {
		if !slices.Contains(m.Words, w) {
			m.Words = append(m.Words, w)
		}
	}
	return m
}

// runner prints a rollout's steps and marks the traffic's phases by them
// (as a fault's when the rollout is made with one on purpose); each of
// its steps means the control plane's restarts on its node.
func (r *run) runner(load *traffic.Traffic, fault bool) *rollout.Runner {
	m := r.restarting(restarts.ControlPlane)
	runner := &rollout.Runner{Out: r.out, OnStep: func(ctx context.Context, step string) {
		if load != nil {
			mark := load.Phase
			if fault {
				mark = load.Fault
			}
			r.refreshed(mark(ctx, step))
		}
	}}
	m.Rollouts = append(m.Rollouts, runner)
	return runner
}

// rolloutSteps are the steps of the rollouts phase ran by r.runner, as spans.
func (r *run) rolloutSteps(phase string) []report.Phase {
	m := r.restarts[phase]
	if m == nil {
		return nil
	}
	var out []report.Phase
	for _, runner := range m.Rollouts {
		for _, s := range runner.Steps {
			sp := report.Phase{Name: s.Name, Node: s.Node, Start: s.Start, End: s.Start.Add(s.Duration)}
			if s.Err != nil {
				sp.Error = s.Err.Error()
			}
			out = append(out, sp)
		}
	}
	return out
}

// refreshed says, without stopping the run, that the traffic could not
// follow the control planes when it began a phase (Traffic.Phase, Fault).
func (r *run) refreshed(err error) {
	if err != nil {
		fmt.Fprintf(r.out, "traffic refresh: %v\n", err)
	}
}
