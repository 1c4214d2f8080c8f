package certification

import (
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
)

// Meant says whether a step meant an event: one that happened within a
// phase (or, for a check's own Pod, one made within it) that restarts
// says is meant to restart what names the event - restarts.ControlPlane
// for the phases a rollout acted in or a fault killed a control-plane
// component, restarts.Workloads for the checks that crash their own Pods
// - on the nodes on names for the phase, when it names any (a fault's
// node), else on any node (a rollout's phase acts on every control
// plane).
func Meant(phases []report.Phase, meant, on map[string][]string) func(restarts.Event) bool {
	var spans []restarts.Span
	for _, p := range phases {
		if words := meant[p.Name]; len(words) > 0 {
			spans = append(spans, restarts.Span{Name: p.Name, Start: p.Start, End: p.End, Restarts: words, Nodes: on[p.Name]})
		}
	}
	return restarts.Meant(spans)
}
