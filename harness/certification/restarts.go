package certification

import (
	"slices"

	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
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
