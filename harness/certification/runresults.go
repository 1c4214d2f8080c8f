package certification

import (
	"strings"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
)

// soFar is the run's results as they stand: its verdicts, and for every
// promise of its plan not judged yet the plan's own verdict (not
// applicable, not selected) or an error saying it was not judged yet -
// never a pass. r's verdicts are left as they are.
func (r *run) soFar() report.Run {
	out := r.result()
	for _, v := range r.plan {
		if _, judged := r.verdicts[v.ID]; judged {
			continue
		}
		if v.Outcome == promise.Pass {
			v = promise.Errored(v.ID, "not judged yet: these results were kept while the run went on (it had got to the end of %q)", r.current)
		}
		out.Promises = append(out.Promises, report.Result{Verdict: v})
	}
	return out
}

// result is the run's results: its timeline, figures and the verdicts
// judged.
func (r *run) result() report.Run {
	out := report.Run{Strategy: string(r.strategy), Shard: strings.Join(r.in.Shard, ","), Cluster: r.in.Name + "-" + string(r.strategy), Phases: r.phases, Disruption: r.disruption, Steps: r.steps, Components: r.components,
		Events: r.events, Guard: r.tables(), Memory: r.memory, Canary: r.canary}
	for id, v := range r.verdicts {
		out.Promises = append(out.Promises, report.Result{Verdict: v, Measured: r.measured[id]})
	}
	return out
}
