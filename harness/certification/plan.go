package certification

import (
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// surgePlan is which phases of the surge run the selected promises need:
// a phase runs when it judges a selected promise, or when a later phase
// that runs needs what it leaves (the traffic, a cluster back at all-old).
// With every promise selected, every phase runs.
type surgePlan struct {
	refused, interrupted, window, proxy, faults, variant, traffic, rollback, windowTwo, through, sidecars bool
	// halts: a rollout resumed from the mixed window with a breach on
	// purpose, under the traffic its guard reads, before the rollback.
	halts bool
}

// wants says whether any promise of the groups is selected.
func (in Input) wants(groups ...[]promise.ID) bool {
	for _, g := range groups {
		for _, id := range g {
			if ok, _ := in.selected(id); ok {
				return true
			}
		}
	}
	return false
}

func (in Input) surgePlan() surgePlan {
	needs := func(p Part) bool { return in.needs(p, rollout.StrategySurge) }
	p := surgePlan{
		refused:     needs(partRefused),
		interrupted: needs(partInterrupted),
		proxy:       needs(partProxy),
		faults:      needs(partFaults),
		variant:     needs(partVariant),
		windowTwo:   needs(partWindowTwo) || needs(partTwoFaults),
		sidecars:    in.sidecars(rollout.StrategySurge),
		halts:       in.wants([]promise.ID{"rollout.guard.halts"}),
	}
	// The traffic runs when its verdicts are wanted, and then across
	// every transition of a whole run's: a shard that judges it proves
	// no less of it than the run in one piece. The breach on purpose
	// needs it too, for its guard to read, and nothing more.
	judged := needs(partTraffic)
	p.traffic = judged || p.halts
	p.through = needs(partThrough) || judged || p.sidecars
	p.window = needs(partWindow) || needs(partRollback) || p.proxy || p.faults || p.variant || p.windowTwo
	p.windowTwo = p.windowTwo || (judged && p.window)
	// Through starts from all-old: after the window, a rollback first.
	p.rollback = needs(partRollback) || p.windowTwo || (p.window && p.through)
	return p
}

// Parts names, in order, the parts the run of strategy s takes for the
// promises selected: what --dry-run shows beside what they judge.
func (in Input) Parts(s rollout.Strategy) []string {
	if s == rollout.StrategyInPlace {
		out := []string{"create", "load the newer images"}
		if in.needs(partTraffic, s) {
			out = append(out, "traffic")
		}
		out = append(out, "roll every control plane in place")
		if in.sidecars(s) {
			out = append(out, "the sidecar Jobs")
		}
		return out
	}
	p := in.surgePlan()
	var out []string
	for _, part := range []struct {
		on   bool
		name string
	}{
		{true, "create"}, {p.refused, "refused rollouts"}, {p.interrupted, "an interrupted rollout"},
		{p.window, "the mixed window"}, {p.proxy, "the proxy's checks"}, {p.faults, "faults"},
		{p.variant, "the runtime-config variant"}, {p.traffic, "traffic"}, {p.window && p.rollback, "rollback"},
		{p.window && p.windowTwo, "the mixed window with two"}, {p.through, "through"}, {p.sidecars, "native sidecars"},
	} {
		if part.on {
			out = append(out, part.name)
		}
	}
	return out
}
