package certification

import (
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
)

// RolloutMeant says whether a rollout or a fault meant an event: one
// that happened within rolling, the spans of the phases a rollout acted in
// or a fault killed a control-plane component, and that such a step
// restarts (restarts.ControlPlane).
func RolloutMeant(rolling []report.Phase) func(restarts.Event) bool {
	spans := make([]restarts.Span, 0, len(rolling))
	for _, p := range rolling {
		spans = append(spans, restarts.Span{Name: p.Name, Start: p.Start, End: p.End, Restarts: []string{restarts.ControlPlane}})
	}
	return restarts.Meant(spans)
}
