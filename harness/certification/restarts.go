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
// the node it acts on (any, for a step on the whole cluster), while it
// runs.
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
		var steps []rollout.Step
		for _, r := range m.Rollouts {
			steps = append(steps, r.Steps...)
		}
		if len(steps) > 0 && slices.Contains(words, restarts.ControlPlane) {
			words = slices.DeleteFunc(slices.Clone(words), func(w string) bool { return w == restarts.ControlPlane })
			for _, st := range steps {
				span := restarts.Span{Name: p.Name + ": " + st.Name, Start: st.Start, End: st.Start.Add(st.Duration), Restarts: []string{restarts.ControlPlane}}
				if st.Node != "" {
					span.Nodes = []string{st.Node}
				}
				spans = append(spans, span)
			}
		}
		if len(words) > 0 {
			spans = append(spans, restarts.Span{Name: p.Name, Start: p.Start, End: p.End, Restarts: words, Nodes: m.Nodes})
		}
	}
	return restarts.Meant(spans)
}
