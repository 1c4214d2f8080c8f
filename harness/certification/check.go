package certification

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/guard"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/sidecarchecks"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

// Part is a span of a certification run that judges checks: what the
// run does there first (a rollout, a window opened, the traffic stopped),
// then the part's checks, in the order they are registered (checks).
type Part int

// The parts, in the order a surge run takes them. Through, traffic,
// sidecars and the whole run are the in-place run's as well.
const (
	partRefused     Part = iota // rollouts the input forbids
	partInterrupted             // a rollout cut short, rolled back
	partWindow                  // one control plane at To
	partProxy                   // the proxy, in window one's resource
	partFaults                  // window one's faults, each a phase
	partVariant                 // the runtime-config variant, a phase
	partRollback                // back to all-old under the traffic
	partWindowTwo               // two control planes at To
	partTwoFaults               // window two's faults, each a phase
	partThrough                 // every control plane to To
	partTraffic                 // the traffic, stopped and judged
	partSidecars                // native sidecars on both kubelets
	partWorker                  // a worker replaced, after the sidecars
	partRun                     // what the whole run recorded
)

// inPlace says whether the in-place run takes part p: it rolls every
// control plane through under the traffic and holds no window.
func (p Part) inPlace() bool {
	return p == partThrough || p == partTraffic || p == partSidecars || p == partRun
}

// faults says part p injects faults on purpose, each a phase.
func (p Part) faults() bool { return p == partFaults || p == partTwoFaults }

// atOnce is how many of part p's checks run at the same time: the
// sidecar checks, which wait on their Pods far more than on the CPU, a
// few at a time; every other part's one after another.
func (p Part) atOnce() int {
	if p == partSidecars {
		return sidecarchecks.ChecksAtOnce
	}
	return 1
}

// A Check judges promises (IDs) in the parts of a run it is registered
// in. Judge gives a verdict on each of IDs and on nothing else; the
// runner knows no check by name: it runs each part's checks the
// selection wants (any of IDs selected), and the plan of the phases, what
// each strategy judges and docs/promises.md are derived from the checks.
type Check struct {
	IDs []promise.ID
	// Also are promises the check judges in passing, first-hand elsewhere:
	// its verdicts on them are kept (the worst of all counts), but
	// selecting them does not run it.
	Also []promise.ID
	// In are the parts that judge it, each when it runs; selecting the
	// check makes the run take the first (rollout.membership is judged
	// after every rollout, and asks for the rollout through).
	In []Part
	// Strategy, when set, is the only strategy whose run judges it.
	Strategy rollout.Strategy
	// Phase, when set, names the phase of its own the check runs as: a
	// fault or a variant, whose restarts are meant in it alone.
	Phase func(*Env) string
	// Restarts, when set, says what the check restarts on purpose
	// (Words, on Nodes when it names them, else on any node): meant
	// in its phase, and a restart of anything else is not.
	Restarts func(*Env) Meaning
	Judge    func(context.Context, *Env) []promise.Verdict
}

// Env is what a check is judged with: the run's cluster and input, and
// what its part left (a window, the traffic's summary, the sidecars'
// fixture). A part fills what it makes; the rest is nil.
type Env struct {
	C        *cluster.Cluster
	Pair     promise.Pair
	Images   *nodeimage.Resolver
	Budget   promise.Budget
	Strategy rollout.Strategy
	Out      io.Writer
	// Before is the object the transitions must leave intact.
	Before *corev1.ConfigMap
	// After names the rollout the part just did (rollout.membership's
	// "after ...").
	After string
	// Window is the mixed window the part judges in (window one, window
	// two, the variant's split); WindowErr why window one could not be
	// opened, Stranded what a client kept of it.
	Window    *Window
	WindowErr error
	Stranded  *Stranded
	Traffic   *traffic.Summary
	// Load is the traffic under way, if any: a fault's phase marks its
	// requests (traffic.Traffic.Fault).
	Load *traffic.Traffic
	// Guards are the signal tables of the rollouts made under the
	// traffic so far; Halt the one with a breach made on purpose.
	Guards []report.GuardedRollout
	Halt   *Halt
	// Read is what the healthy rollouts' guards read - forwarded
	// requests, discovery after each step - pooled; Thresholds the guards'.
	Read       guard.Totals
	Thresholds promise.GuardThresholds
	// Probed says whether the traffic asked for a resource only the
	// newer version serves.
	Probed   bool
	Sidecars *sidecarchecks.Sidecars
	Monitor  *restarts.Monitor
	Meant    func(restarts.Event) bool
	// Measure records a measurement beside id's verdict.
	Measure func(id promise.ID, format string, args ...any)
}

// one is a check of one verdict as a check of several.
func one(judge func(context.Context, *Env) promise.Verdict) func(context.Context, *Env) []promise.Verdict {
	return func(ctx context.Context, e *Env) []promise.Verdict {
		return []promise.Verdict{judge(ctx, e)}
	}
}

// inWindow is a check of the mixed window as a Judge.
func inWindow(check func(context.Context, *cluster.Cluster, *Window) []promise.Verdict) func(context.Context, *Env) []promise.Verdict {
	return func(ctx context.Context, e *Env) []promise.Verdict { return check(ctx, e.C, e.Window) }
}

// restartsControlPlane is a check's Restarts that names the control
// plane of the node at it picks.
func restartsControlPlane(at func(*Env) string) func(*Env) Meaning {
	return func(e *Env) Meaning {
		return Meaning{Words: []string{restarts.ControlPlane}, Nodes: []string{at(e)}}
	}
}

// judges says whether the run of strategy s judges c when its parts run.
func (c *Check) judges(s rollout.Strategy) bool {
	if c.Strategy != "" && c.Strategy != s {
		return false
	}
	return s == rollout.StrategySurge || slices.ContainsFunc(c.In, Part.inPlace)
}

// checksIn are the checks part p judges in the run of strategy s that
// the selection wants, in the order registered.
func (in Input) checksIn(p Part, s rollout.Strategy) []*Check {
	var out []*Check
	for i := range checks {
		c := &checks[i]
		if slices.Contains(c.In, p) && c.judges(s) && in.wants(c.IDs) {
			out = append(out, c)
		}
	}
	return out
}

// needs says whether the run of strategy s must take part p for a
// selected check: one that names p first.
func (in Input) needs(p Part, s rollout.Strategy) bool {
	for i := range checks {
		if c := &checks[i]; c.In[0] == p && c.judges(s) && in.wants(c.IDs) {
			return true
		}
	}
	return false
}

// sidecars says whether the run of strategy s takes the sidecar phase:
// its sidecar checks, or the worker's replacement after them.
func (in Input) sidecars(s rollout.Strategy) bool {
	return in.needs(partSidecars, s) || in.needs(partWorker, s)
}

// idsIn are the promises the checks of parts judge, selected or not.
func idsIn(parts ...Part) []promise.ID {
	var out []promise.ID
	for _, c := range checks {
		if slices.ContainsFunc(c.In, func(p Part) bool { return slices.Contains(parts, p) }) {
			out = append(out, c.IDs...)
		}
	}
	return dedupe(out)
}

// checkedBy is what the run of strategy s judges; a promise no check
// judges is a hole, and a test of the catalogue says so.
func checkedBy(s rollout.Strategy) []promise.ID {
	var out []promise.ID
	for i := range checks {
		if checks[i].judges(s) {
			out = append(out, checks[i].IDs...)
		}
	}
	return dedupe(out)
}

func dedupe(ids []promise.ID) []promise.ID {
	var out []promise.ID
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// judgeIn judges the checks part p holds for this run that the selection
// wants, with e: a check with a phase of its own runs as that phase, the
// rest inside the phase under way. A phase that cannot be run ends the
// run (its error).
func (r *run) judgeIn(ctx context.Context, p Part, e *Env) error {
	cs := r.in.checksIn(p, r.strategy)
	if n := p.atOnce(); n > 1 {
		r.judgeTogether(ctx, cs, e, n)
		return nil
	}
	for _, c := range cs {
		if c.Phase == nil {
			r.judgeCheck(ctx, c, e)
			continue
		}
		name := c.Phase(e)
		if err := r.phase(ctx, name, func(ctx context.Context) error {
			if p.faults() && e.Load != nil {
				r.refreshed(e.Load.Fault(ctx, name))
			}
			r.judgeCheck(ctx, c, e)
			return nil
		}); err != nil {
			return err
		}
	}
	if p.faults() && e.Load != nil {
		r.refreshed(e.Load.Phase(ctx, "the faults over"))
	}
	return nil
}

// judgeTogether runs the checks cs, n at a time, in the phase under way,
// and keeps their verdicts in their order once all are done.
func (r *run) judgeTogether(ctx context.Context, cs []*Check, e *Env, n int) {
	results := make([][]promise.Verdict, len(cs))
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	phase, done := r.current, 0
	for i, c := range cs {
		r.meanRestarts(c, e)
		slots <- struct{}{} // in the order registered: the longest first
		wg.Go(func() {
			defer func() { <-slots }()
			took := r.timed(phase, c, func() { results[i] = c.Judge(ctx, e) })
			// Their verdicts come together at the end: say each is done,
			// and how many of the phase's are.
			r.mu.Lock()
			defer r.mu.Unlock()
			done++
			fmt.Fprintf(r.out, "  ... %d of %d: %s judged (%s)\n", done, len(cs), strings.Join(ids(c.IDs), ", "), took.Round(time.Second))
		})
	}
	wg.Wait()
	for i, c := range cs {
		r.keepVerdicts(c, results[i])
	}
}

// judgeCheck runs c and keeps its verdicts; a check inside a phase of
// another's is one of its steps.
func (r *run) judgeCheck(ctx context.Context, c *Check, e *Env) {
	r.meanRestarts(c, e)
	var vs []promise.Verdict
	if c.Phase == nil {
		r.timed(r.current, c, func() { vs = c.Judge(ctx, e) })
	} else {
		vs = c.Judge(ctx, e)
	}
	r.keepVerdicts(c, vs)
}

// timed runs judge, the check c, and keeps its span as a step of phase:
// results.json and report.html show where a phase's time went.
func (r *run) timed(phase string, c *Check, judge func()) time.Duration {
	start := time.Now()
	judge()
	end := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checkSteps == nil {
		r.checkSteps = map[string][]report.Phase{}
	}
	r.checkSteps[phase] = append(r.checkSteps[phase], report.Phase{Name: "judge " + strings.Join(ids(c.IDs), ", "), Start: start, End: end})
	return end.Sub(start)
}

// stepsOf are the checks phase ran inside it, in the order they began.
func (r *run) stepsOf(phase string) []report.Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.checkSteps[phase])
	slices.SortFunc(out, func(a, b report.Phase) int { return a.Start.Compare(b.Start) })
	return out
}

func ids(in []promise.ID) []string {
	out := make([]string, len(in))
	for i, id := range in {
		out[i] = string(id)
	}
	return out
}

// meanRestarts marks the phase under way as meant to restart what c
// restarts on purpose.
func (r *run) meanRestarts(c *Check, e *Env) {
	if c.Restarts != nil {
		want := c.Restarts(e)
		m := r.restarting(want.Words...)
		m.Nodes = append(m.Nodes, want.Nodes...)
	}
}

// keepVerdicts keeps c's verdicts vs; a verdict on a promise c does not
// declare (IDs, Also) is a fault of the check, and says so.
func (r *run) keepVerdicts(c *Check, vs []promise.Verdict) {
	for _, v := range vs {
		if !slices.Contains(c.IDs, v.ID) && !slices.Contains(c.Also, v.ID) {
			v = promise.Errored(v.ID, "judged by the check of %v, which does not declare it", c.IDs)
		}
		r.judge(v)
	}
}

// cannot gives every promise the checks of parts judge the verdict
// why(id): the part could not be reached (a window not opened).
func (r *run) cannot(why func(promise.ID) promise.Verdict, parts ...Part) {
	for _, id := range idsIn(parts...) {
		r.judge(why(id))
	}
}

// env is what the run's checks are judged with, as it stands.
func (r *run) env(before *corev1.ConfigMap) *Env {
	return &Env{C: r.c, Pair: r.in.Pair, Images: r.in.Images, Budget: r.in.Budget, Strategy: r.strategy, Out: r.out,
		Before: before, Window: r.window, WindowErr: r.windowErr, Stranded: r.stranded, Monitor: r.monitor, Measure: r.measure,
		Guards: r.tables(), Halt: r.halt, Read: r.read(), Thresholds: r.in.thresholds(), Probed: r.newerOnly != ""}
}
