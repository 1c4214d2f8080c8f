package certification

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/guard"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

// thresholds are the guard's: the input's, else the repository's.
func (in Input) thresholds() promise.GuardThresholds {
	if in.Guard == nil {
		return promise.DefaultGuard
	}
	return *in.Guard
}

// guarded is a Runner for a rollout under load, watched by a rollout
// guard whose table the run's results keep; without load, r.runner's.
// name is the rollout, injected the breach made on purpose before it.
func (r *run) guarded(load *traffic.Traffic, name, injected string) (*rollout.Runner, *guard.Guard) {
	runner := r.runner(load, injected != "")
	if load == nil {
		return runner, nil
	}
	in := guard.Input{Thresholds: r.in.thresholds(), Rollout: name, Injected: injected, Discovery: r.lookAtDiscovery}
	if r.newerOnly != "" {
		in.Older, in.Newer = r.in.Pair.From.String(), r.in.Pair.To.String()
	}
	g := guard.New(in, load)
	runner.Guard = g
	r.guards = append(r.guards, g)
	return runner, g
}

// read is what the guards of the run's healthy rollouts read (not the
// one with a breach on purpose), pooled.
func (r *run) read() guard.Totals {
	var t guard.Totals
	for _, g := range r.guards {
		if g.Table().Injected == "" {
			t = t.Add(g.Totals())
		}
	}
	return t
}

// lookAtDiscovery is the guard's look at the cluster's discovery
// (guard.Discovery): the joined control planes whose apiserver answers
// for its own discovery are the members - a node not yet joined, or a
// server taken away, is none - and each member's peer-merged discovery
// must list what some member serves, and nothing none of them does.
func (r *run) lookAtDiscovery(ctx context.Context) (guard.Look, error) {
	look := guard.Look{Members: map[string]string{}}
	cps, err := r.c.ControlPlanes(ctx)
	if err != nil {
		return look, err
	}
	joined, err := rollout.Joined(ctx, r.c)
	look.Requests++
	if err != nil {
		return look, err
	}
	served := discovery.Set{}
	var members []Server
	for _, n := range cps {
		if !joined[n.Name] {
			continue
		}
		s, local, err := r.member(ctx, n)
		look.Requests += 2
		if err != nil {
			continue
		}
		members, look.Members[s.Name] = append(members, s), s.Version.String()
		maps.Copy(served, local)
	}
	for _, s := range members {
		look.Requests++
		merged, err := s.merged(ctx)
		if err != nil {
			look.Off = append(look.Off, s.Name+": "+err.Error())
			continue
		}
		for _, res := range discovery.OnlyIn(served, merged) {
			look.Off = append(look.Off, s.Name+" lacks "+res.Key())
		}
		for _, res := range discovery.OnlyIn(merged, served) {
			look.Off = append(look.Off, s.Name+" still advertises "+res.Key())
		}
	}
	return look, nil
}

// member is control plane n as a member of a look at discovery, and
// what it serves itself: an error when its apiserver does not answer.
func (r *run) member(ctx context.Context, n cluster.Node) (Server, discovery.Set, error) {
	cfg, err := r.c.APIServerConfig(ctx, n)
	if err != nil {
		return Server{}, nil, err
	}
	s := Server{Name: n.Name, Config: cfg}.WithTimeout(lookTimeout)
	cs, err := s.client()
	if err != nil {
		return s, nil, err
	}
	if s.Version, err = rollout.ServerVersion(ctx, cs); err != nil {
		return s, nil, err
	}
	local, err := s.local(ctx)
	return s, local, err
}

// lookTimeout bounds each request of a look at discovery: a server that
// does not answer in it is no member this time.
const lookTimeout = 5 * time.Second

// JudgeDiscoverySteps judges rollout.discovery.each-step on the signal
// tables of the run's healthy rollouts and what their guards read: after
// every step, every member's merged discovery agreed with what the
// members serve within th's bound - decided after every step, and after
// one at least at which the apiservers changed (a join, a removal), or
// convergence was never put to the test.
func JudgeDiscoverySteps(tables []report.GuardedRollout, read guard.Totals, th promise.GuardThresholds) promise.Verdict {
	const id = "rollout.discovery.each-step"
	steps := 0
	for _, t := range tables {
		if t.Injected != "" {
			continue
		}
		for _, s := range t.Steps {
			steps++
			for _, sig := range s.Signals {
				switch {
				case sig.Signal != guard.SignalDiscovery:
				case sig.Decision == report.GuardBreach:
					return fail(id, "%s, after %q: %s", t.Rollout, s.Step, sig.Value)
				case sig.Decision != report.GuardOK:
					return promise.Errored(id, "%s, after %q: discovery was not decided (%s)", t.Rollout, s.Step, sig.Value)
				}
			}
		}
	}
	switch {
	case steps == 0:
		return promise.Errored(id, "no rollout ran under the guard")
	case read.Converged != steps:
		return promise.Errored(id, "discovery decided after %d of %d steps", read.Converged, steps)
	case read.Changed == 0:
		return promise.Errored(id, "no step of %d changed which apiservers answer: convergence was never put to the test", steps)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{fmt.Sprintf(
		"after each of %d steps every merged discovery showed what the apiservers served, and nothing more, within %s (at most %s); %d of those steps changed the apiservers",
		steps, read.Slowest.Round(100*time.Millisecond), th.MaxDiscoveryConvergence, read.Changed)}}
}

// JudgeObjective judges rollout.forwarded-objective on the forwarded
// requests of the run's healthy rollouts, pooled: at most th's share
// failed (5xx or no answer), and forwarding added at most th's bound at
// p99 over the same request served where the resource lives - each on
// guard.LatencyFloor requests at least, below which a share or a p99 says
// too little to judge. probed says whether the traffic asked for a
// resource only the newer version serves: without one nothing is
// forwarded.
func JudgeObjective(t guard.Totals, th promise.GuardThresholds, probed bool) promise.Verdict {
	const id = "rollout.forwarded-objective"
	if !probed {
		return promise.Inapplicable(id, "the pair has no resource only the newer version serves for the traffic to ask for: nothing is forwarded")
	}
	if t.Forwarded < guard.LatencyFloor {
		return promise.Errored(id, "%d forwarded requests over the rollouts: the objective is judged on %d at least", t.Forwarded, guard.LatencyFloor)
	}
	share := float64(t.Failed) / float64(t.Forwarded)
	ev := []string{fmt.Sprintf("%d of %d forwarded requests failed (%.2f%%; at most %g%%)", t.Failed, t.Forwarded, 100*share, 100*th.MaxForwardedFailures)}
	if share > th.MaxForwardedFailures {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: "more forwarded requests failed than the objective allows: " + ev[0]}
	}
	fwd, local, ok := t.P99s()
	if !ok {
		return promise.Verdict{ID: id, Outcome: promise.Error, Evidence: ev, Reason: fmt.Sprintf("%d answered forwarded and %d local requests: a p99 is read on %d of each at least",
			len(t.ForwardedLatencies), len(t.LocalLatencies), guard.LatencyFloor)}
	}
	ev = append(ev, fmt.Sprintf("p99 %s forwarded over %d, %s local over %d: forwarding added %s (at most %s)", fwd.Round(time.Millisecond), len(t.ForwardedLatencies),
		local.Round(time.Millisecond), len(t.LocalLatencies), (fwd-local).Round(time.Millisecond), th.MaxForwardedAddedP99))
	if fwd-local > th.MaxForwardedAddedP99.Duration {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: "forwarding added more latency at p99 than the objective allows: " + ev[1]}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

// tables are the signal tables of the run's guarded rollouts.
func (r *run) tables() []report.GuardedRollout {
	var out []report.GuardedRollout
	for _, g := range r.guards {
		out = append(out, g.Table())
	}
	return out
}

// Halt is what a rollout with a breach made on purpose did: the breach,
// the control planes there before it, the steps it ran, how it ended
// and its guard's table.
type Halt struct {
	// Unmade is why the breach could not be made, if it could not.
	Unmade    error
	Injection string
	Members   []string
	Steps     []rollout.Step
	Ended     error
	Table     report.GuardedRollout
}

// breachOnPurpose resumes the rollout from the mixed window w, one more
// control plane at most, with every older apiserver's link to w's first
// newer one black-holed: the requests they forward for the newer-only
// resource go unanswered, which the guard must see and halt on before
// any older control plane is drained. The links are restored before it
// returns; the rollback that follows is the guard's choice carried out.
//
// A breach that cannot be made is said in the Halt (an error verdict, the
// rollback still due); links that cannot be restored fail the phase.
func (r *run) breachOnPurpose(ctx context.Context, load *traffic.Traffic, w *Window) (*Halt, error) {
	h := &Halt{Injection: fmt.Sprintf("every older apiserver's link to %s, the only one serving %s, black-holed", w.New[0].Name, w.Resource.Key())}
	for _, s := range append(slices.Clone(w.Old), w.New[0]) {
		h.Members = append(h.Members, s.Name)
	}
	hole, err := linksTo(ctx, r.c, w)
	if err == nil {
		err = hole.Inject(ctx, r.c)
	}
	if h.Unmade = err; err != nil {
		return h, hole.Revert(context.WithoutCancel(ctx), r.c)
	}
	// Its requests are the fault's, the guard's to read, not the
	// disruption budget's: marked from the injection to the revert.
	r.refreshed(load.Fault(ctx, "a breach on purpose: "+h.Injection))
	runner, g := r.guarded(load, fmt.Sprintf("resumed to %s with a breach on purpose", r.in.Pair.To), h.Injection)
	h.Ended = rollout.Roll(ctx, r.c, rollout.RollInput{To: r.in.Pair.To, Strategy: rollout.StrategySurge, PauseAfter: 1,
		Images: r.in.Images, Runner: runner})
	h.Table, h.Steps = g.Table(), runner.Steps
	err = hole.Revert(context.WithoutCancel(ctx), r.c)
	r.refreshed(load.Phase(ctx, "the breach on purpose reverted"))
	return h, err
}

// linksTo is the black hole of every older apiserver's link to w's first
// newer one.
func linksTo(ctx context.Context, c *cluster.Cluster, w *Window) (faults.All, error) {
	peer, err := c.Node(ctx, w.New[0].Name)
	if err != nil {
		return nil, err
	}
	var hole faults.All
	for _, s := range w.Old {
		n, err := c.Node(ctx, s.Name)
		if err != nil {
			return nil, err
		}
		hole = append(hole, &faults.BlackHole{From: n, To: peer})
	}
	return hole, nil
}

// JudgeHalts judges rollout.guard.halts: the rollout with a breach made
// on purpose was halted by its guard, on a signal, before any step acted
// on a control plane that was there before it (nothing of the cluster
// taken away), and the rollback after it returned every control plane
// to the older version (back is what it left, or why it did not).
func JudgeHalts(h *Halt, back error) promise.Verdict {
	const id = "rollout.guard.halts"
	switch {
	case h == nil:
		return promise.Errored(id, "no rollout was made with a breach on purpose")
	case h.Unmade != nil:
		return promise.Errored(id, "the breach on purpose (%s) could not be made: %v", h.Injection, h.Unmade)
	}
	ev := []string{"injected: " + h.Injection, "steps run: " + stepNames(h.Steps)}
	halted, ok := rollout.AsHalted(h.Ended)
	switch {
	case !ok:
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev,
			Reason: fmt.Sprintf("the rollout was not halted by its guard: it ended with %v", orOK(h.Ended))}
	case h.Table.Halted == nil:
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: "halted, but the signal table names no breach"}
	}
	for _, s := range h.Steps {
		if slices.Contains(h.Members, s.Node) {
			return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev,
				Reason: fmt.Sprintf("before the halt the rollout had already acted on %s, a control plane there before it (%q)", s.Node, s.Name)}
		}
	}
	b := h.Table.Halted
	ev = append(ev, fmt.Sprintf("halted after %q: %s %s over %d requests, threshold %s", halted.After, b.Signal, b.Value, b.Requests, b.Threshold))
	if back != nil {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf("after the rollback that followed the halt: %v", back)}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: append(ev, "rolled back: every control plane at the older version again")}
}

// JudgeQuiet judges rollout.guard.quiet on the signal tables of the
// run's guarded rollouts: none but one with a breach made on purpose was
// halted, and each decided its signals on enough requests - a guard that
// decided nothing proved nothing: the share of 5xx in every rollout, and
// of failed forwarded requests in one at least when the traffic asked
// for the newer-only resource.
func JudgeQuiet(tables []report.GuardedRollout) promise.Verdict {
	const id = "rollout.guard.quiet"
	var ev []string
	healthy, forwarded, probed := 0, 0, false
	for _, t := range tables {
		if t.Injected != "" {
			continue
		}
		healthy++
		if t.Halted != nil {
			return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf(
				"%s was halted after %q: %s %s over %d requests, threshold %s", t.Rollout, t.HaltedAfter, t.Halted.Signal, t.Halted.Value, t.Halted.Requests, t.Halted.Threshold)}
		}
		decided := map[string]int{}
		for _, s := range t.Steps {
			for _, sig := range s.Signals {
				probed = probed || (sig.Signal == guard.SignalForwarded && sig.Decision != report.GuardNA)
				if sig.Decision == report.GuardOK {
					decided[sig.Signal]++
				}
			}
		}
		if decided[guard.Signal5xx] == 0 {
			return promise.Errored(id, "the guard of %s decided the 5xx share in none of %d step(s): too few requests to judge a rollout on", t.Rollout, len(t.Steps))
		}
		forwarded += decided[guard.SignalForwarded]
		ev = append(ev, fmt.Sprintf("%s: %d steps, not halted; decided ok: %s x%d, %s x%d, %s x%d, %s x%d, %s x%d", t.Rollout, len(t.Steps),
			guard.Signal5xx, decided[guard.Signal5xx], guard.SignalForwarded, decided[guard.SignalForwarded],
			guard.SignalFalse404, decided[guard.SignalFalse404], guard.SignalAddedP99, decided[guard.SignalAddedP99],
			guard.SignalDiscovery, decided[guard.SignalDiscovery]))
	}
	switch {
	case healthy == 0:
		return promise.Errored(id, "no rollout ran under the guard")
	case probed && forwarded == 0:
		return promise.Errored(id, "the traffic asked for a resource only the newer version serves, but no guard decided %s: too few forwarded requests to judge on", guard.SignalForwarded)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

func stepNames(steps []rollout.Step) string {
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	return strings.Join(names, "; ")
}
