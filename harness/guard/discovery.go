package guard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// lookEvery is how often the discovery signal looks again until every
// merged discovery agrees.
const lookEvery = 500 * time.Millisecond

// Discovery is one look at the cluster's discovery.
type Discovery func(ctx context.Context) (Look, error)

// Look is what one look at discovery saw: the apiservers that answer
// (members) and their versions, what it took to ask them, and every way
// a member's peer-merged discovery differs from what the members serve -
// a resource it lacks, or one it advertises that none of them serves - a
// line each; none when they agree.
type Look struct {
	Members  map[string]string
	Requests int
	Off      []string
}

// discovery decides the discovery signal: how long after the step every
// member's merged discovery took to show what the members serve and
// nothing more, within its bound. It is not read after an earlier
// signal's breach: the rollout halts on that, at once.
func (g *Guard) discovery(ctx context.Context, earlier []report.GuardSignal) report.GuardSignal {
	s := report.GuardSignal{Signal: SignalDiscovery, Threshold: g.threshold(SignalDiscovery), Decision: report.GuardNA}
	if g.in.Discovery == nil {
		s.Value = "not read in this run"
		return s
	}
	if i := slices.IndexFunc(earlier, func(e report.GuardSignal) bool { return e.Decision == report.GuardBreach }); i >= 0 {
		s.Value = "not read: " + earlier[i].Signal + " halts the rollout"
		return s
	}
	var members map[string]string
	start := time.Now()
	err := wait.Within(ctx, wait.Budget{Timeout: g.in.Thresholds.MaxDiscoveryConvergence.Duration, Interval: lookEvery},
		"every apiserver's merged discovery to show what the apiservers serve, and nothing more",
		func(ctx context.Context) (bool, string, error) {
			look, err := g.in.Discovery(ctx)
			s.Requests += look.Requests
			if err != nil {
				return false, err.Error(), nil
			}
			members = look.Members
			if len(members) == 0 { // nothing answered: nothing agrees
				return false, "no apiserver answered for its discovery", nil
			}
			return len(look.Off) == 0, strings.Join(look.Off, "; "), nil
		})
	took := time.Since(start)
	if err != nil {
		s.Value, s.Decision = err.Error(), report.GuardBreach
		return s
	}
	s.Value, s.Decision = fmt.Sprintf("%d apiservers agree after %s", len(members), took.Round(100*time.Millisecond)), report.GuardOK
	if moved := moved(g.members, members); g.members != nil && moved != "" {
		s.Value += " (" + moved + ")"
		g.totals.Changed++
	}
	g.members = members
	g.totals.Converged++
	g.totals.Slowest = max(g.totals.Slowest, took)
	return s
}

// moved says which apiservers joined, which changed version and which
// left between before and now (each apiserver's version); nothing when
// none did: a step that changed none changed what they serve.
func moved(before, now map[string]string) string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(now)) {
		switch was, ok := before[n]; {
		case !ok:
			out = append(out, n+" joined at "+now[n])
		case was != now[n]:
			out = append(out, n+" "+was+" -> "+now[n])
		}
	}
	for _, n := range slices.Sorted(maps.Keys(before)) {
		if _, ok := now[n]; !ok {
			out = append(out, n+" left")
		}
	}
	return strings.Join(out, ", ")
}
