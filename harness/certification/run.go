package certification

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/sidecarchecks"
	"github.com/skewer-k8s/skewer/harness/traffic"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// run is one strategy's cluster, its timeline and its verdicts.
type run struct {
	in       Input
	strategy rollout.Strategy
	out      io.Writer
	c        *cluster.Cluster
	phases   []report.Phase
	verdicts map[promise.ID]promise.Verdict
	measured map[promise.ID][]string
	// images are the node images Run resolved for both versions.
	images map[version.Version]string
	// newerOnly is a collection only To serves (its path), learned from
	// discovery in the mixed window: the traffic's false-404 probe.
	newerOnly string
	// window is the mixed window the proxy checks ran in, once they have;
	// stranded what a client kept of it, to meet after the rollback.
	window   *Window
	stranded *Stranded
	// windowErr is why the mixed window could not be opened for the
	// proxy's checks.
	windowErr error
	// disruption is the traffic's table, per backend; steps the load
	// balancer's requests phase by phase.
	disruption []report.Backend
	steps      []report.StepLatency
	// components are what the nodes ran, by when they were read.
	components map[string][]report.Component
	// monitor watches for containers restarting from the cluster's
	// creation to the export of the evidence; current is the phase under
	// way; restarts says, of the phases meant to restart something, what.
	monitor  *restarts.Monitor
	current  string
	restarts map[string]*Meaning
	// stopLogs ends the keeping of every apiserver's log (KeepAPIServerLogs)
	// before the evidence is exported.
	stopLogs func()
	// events are what the monitor saw, for the report's timeline.
	events []report.Event
	// scraping: each phase's edges keep the apiservers' metrics (from the
	// cluster's creation to the export of the evidence); scrapes counts
	// the edges kept, in order.
	scraping bool
	scrapes  int
	// fixture is the sidecar checks' fixture image, built in the
	// background from the cluster's creation on (buildFixture).
	fixture func() (string, error)
	// cleanUpErr is what failed of exporting the evidence and deleting
	// the cluster (cleanUp).
	cleanUpErr error
	// cutShort says, while the transitions run, whether the run was
	// interrupted: a check that fails after it was cut short, not by
	// what it judges.
	cutShort func() bool
}

// readComponents records what every node runs now, as read at when. It
// is provenance, not a check: a node that cannot be read is said in the
// progress and left out.
func (r *run) readComponents(ctx context.Context, when string) {
	comps, err := Components(ctx, r.c)
	if err != nil {
		fmt.Fprintf(r.out, "components at %s: %v\n", when, err)
		return
	}
	if r.components == nil {
		r.components = map[string][]report.Component{}
	}
	r.components[when] = comps
}

// judge keeps a verdict, its waiver applied, merged with one already
// there: a failure stays a failure, a waiver outweighs a pass. A promise
// --only or --skip left out is not judged, whatever a check said of it.
func (r *run) judge(v promise.Verdict) {
	if ok, why := r.in.selected(v.ID); !ok {
		v = promise.Verdict{ID: v.ID, Outcome: promise.NotSelected, Reason: why}
	} else if v.Outcome.Fails() && r.cutShort != nil && r.cutShort() {
		if old, ok := r.verdicts[v.ID]; ok && old.Outcome.Judged() {
			return // judged before the interrupt: that stands
		}
		v = interrupted(v, "cut short: "+v.Reason)
	}
	r.keep(r.in.Waivers.Apply(v, r.in.Strict))
}

// keep merges v into the verdicts as it is, with no waiver: a promise
// the run never got to judge failed for want of proof, and no waiver of
// a behaviour seen covers that.
func (r *run) keep(v promise.Verdict) {
	if r.verdicts == nil {
		r.verdicts = map[promise.ID]promise.Verdict{}
	}
	if old, ok := r.verdicts[v.ID]; ok && weight[old.Outcome] >= weight[v.Outcome] {
		if v.Outcome == promise.Pass {
			old.Evidence = append(old.Evidence, v.Evidence...)
			r.verdicts[v.ID] = old
		}
		return
	}
	fmt.Fprintf(r.out, "  %s %s%s\n", v.ID, v.Outcome, map[bool]string{true: ": " + v.Reason}[v.Reason != ""])
	r.verdicts[v.ID] = v
}

// interrupted is v unjudged because the run was interrupted (Ctrl-C): a
// promise an interrupted run did not get to, or whose check the interrupt
// cut short, is an error - not a failure of what it promises - and the
// certification is incomplete, never a pass.
func interrupted(v promise.Verdict, evidence ...string) promise.Verdict {
	return promise.Verdict{ID: v.ID, Outcome: promise.Error, Reason: "the run was interrupted before this promise was judged",
		Evidence: append(evidence, v.Evidence...)}
}

// weight orders outcomes when a promise is judged more than once in a
// run: the heavier one stands.
var weight = map[promise.Outcome]int{promise.NotSelected: 0, promise.NotApplicable: 0, promise.Pass: 1, promise.Waived: 2, promise.Error: 3, promise.Fail: 4}

func (r *run) measure(id promise.ID, format string, args ...any) {
	if r.measured == nil {
		r.measured = map[promise.ID][]string{}
	}
	text := fmt.Sprintf(format, args...)
	fmt.Fprintf(r.out, "  measured: %s\n", text)
	r.measured[id] = append(r.measured[id], text)
}

// phase runs fn as a span of the timeline. An error ends the run: the
// promises the phase and the ones after it would have judged fail with it.
func (r *run) phase(ctx context.Context, name string, fn func(context.Context) error) error {
	start := time.Now()
	fmt.Fprintf(r.out, "[%s] %s ...\n", r.strategy, name)
	r.current = name
	if r.monitor != nil {
		r.monitor.Phase(name)
	}
	if r.scrapes == 0 {
		r.scrapeMetrics(ctx, "before")
	}
	quiet := wait.Heartbeat(heartbeatEvery, func(d time.Duration) {
		fmt.Fprintf(r.out, "[%s] ... %s: %s so far\n", r.strategy, name, d.Round(time.Second))
	})
	err := fn(ctx)
	quiet()
	p := report.Phase{Name: name, Start: start, End: time.Now(), Steps: r.rolloutSteps(name)}
	r.scrapeMetrics(ctx, "after")
	if err != nil {
		p.Error = err.Error()
		fmt.Fprintf(r.out, "[%s] ✗ %s (%s): %v\n", r.strategy, name, p.End.Sub(start).Round(time.Second), err)
	} else {
		fmt.Fprintf(r.out, "[%s] ✓ %s (%s)\n", r.strategy, name, p.End.Sub(start).Round(time.Second))
	}
	r.phases = append(r.phases, p)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// heartbeatEvery is how often a phase that runs on says so: a phase
// waits minutes at a time (the sidecar checks, a join under traffic) and
// a CI log that shows nothing for that long reads as a hang.
var heartbeatEvery = 30 * time.Second

// judgeAll takes the cluster through the strategy's phases. Whatever
// happens, the cluster goes (unless retained) and every promise ends with
// a verdict.
func (r *run) judgeAll(ctx context.Context, checkpoint func(report.Run)) {
	plan := Plan(r.in)[r.strategy]
	wanted := r.in.makesCluster(r.strategy)
	var err error
	if wanted {
		r.cutShort = func() bool { return ctx.Err() != nil }
		err = r.transitions(ctx)
		r.cutShort = nil
		if r.c != nil {
			// What the whole run recorded: judged when the cluster was made.
			e := r.env(nil)
			e.Meant = Meant(r.phases, r.restarts)
			_ = r.judgeIn(ctx, partRun, e) // no check of the whole run is a phase
			if r.monitor != nil {
				for _, ev := range r.monitor.Events() {
					r.events = append(r.events, report.Event{Time: ev.Time, Kind: ev.Kind, Text: ev.String(), Meant: e.Meant(ev)})
				}
			}
		}
		r.scraping = false
		if r.stopLogs != nil {
			r.stopLogs()
		}
	}
	r.judgeTheRest(ctx, plan, err)
	if wanted && checkpoint != nil {
		// Every verdict is in: kept before the export and the deletion,
		// which may take minutes a cancelled CI job does not have.
		checkpoint(r.result())
	}
	if wanted && r.c != nil {
		var export func(context.Context, string) error
		if r.in.Evidence != "" {
			export = r.c.ExportLogs
		}
		var remove func(context.Context) error
		if !r.in.Retain {
			remove = func(ctx context.Context) error {
				err := r.c.Delete(ctx, false)
				if err != nil && docker.Ping(ctx) != nil {
					// Docker restarts the node containers when it is back.
					return fmt.Errorf("Docker does not answer, so the cluster's containers are left: once it is back, delete them with `skewer down --name %s`: %w", r.c.Name, err)
				}
				return err
			}
		}
		r.cleanUpErr = r.cleanUp(ctx, export, remove)
	}
}

// cleanUp exports the run's evidence (export, given where it goes) and
// then deletes its cluster (remove), each a phase of the timeline with
// minutes of its own, after the verdicts are in and kept; either may be
// nil, not to be done. What failed of it is returned: the verdicts stand,
// but evidence not exported or a cluster left behind is no clean run,
// and the exit status says so.
func (r *run) cleanUp(ctx context.Context, export func(context.Context, string) error, remove func(context.Context) error) error {
	var errs []error
	if export != nil {
		// Kept on a pass as on a failure: what the verdicts rest on.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		dir := filepath.Join(r.in.Evidence, string(r.strategy))
		errs = append(errs, r.phase(ectx, "export the evidence (node logs, every apiserver's audit log)", func(ctx context.Context) error {
			return export(ctx, dir)
		}))
		cancel()
	}
	if remove != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		errs = append(errs, r.phase(dctx, "delete the cluster", remove))
		cancel()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the %s run's clean-up: %w", r.strategy, err)
	}
	return nil
}

// judgeTheRest gives every promise of the plan the run did not judge its
// verdict: the plan's own (not applicable, not selected), interrupted
// when the run was, else an error with why the run ended before it (err).
func (r *run) judgeTheRest(ctx context.Context, plan []promise.Verdict, err error) {
	for _, v := range plan {
		if _, judged := r.verdicts[v.ID]; judged {
			continue
		}
		if v.Outcome != promise.Pass {
			r.judge(v)
			continue
		}
		if ctx.Err() != nil {
			r.judge(interrupted(v))
			continue
		}
		reason := "the run ended before this check"
		if err != nil {
			reason += ": " + err.Error()
		}
		r.keep(promise.Errored(v.ID, "%s", reason))
	}
}

func (r *run) transitions(ctx context.Context) error {
	spec := *r.in.Profile
	spec.Name = r.in.Name + "-" + string(r.strategy)
	spec.Version = r.in.Pair.From
	spec.ControlPlaneVersions, spec.WorkerVersions = nil, nil
	if len(r.in.FeatureGates) > 0 {
		spec.VersionFeatureGates = map[string]map[string]bool{}
		for v, gates := range r.in.FeatureGates {
			spec.VersionFeatureGates[v.String()] = gates
		}
	}
	if err := r.phase(ctx, fmt.Sprintf("create %s at %s", spec.Name, spec.Version), func(ctx context.Context) error {
		// The images Run resolved, not a second resolution of the same.
		resolved := func(ctx context.Context, v version.Version) (string, error) {
			if ref, ok := r.images[v]; ok {
				return ref, nil
			}
			return r.in.Images.Resolve(ctx, v)
		}
		c, err := cluster.Create(ctx, &spec, resolved, cluster.Options{Out: r.out, Verbosity: r.in.Verbosity})
		r.c = c
		return err
	}); err != nil {
		return err
	}
	r.readComponents(ctx, "created")
	if r.in.sidecars(r.strategy) {
		r.buildFixture(ctx)
	}
	r.scraping = true
	if cs, err := r.c.Client(); err == nil {
		if r.monitor, err = restarts.Start(ctx, cs); err != nil {
			fmt.Fprintf(r.out, "the restart monitor did not start: %v\n", err)
		}
	}
	r.stopLogs = r.c.KeepAPIServerLogs(ctx)
	var before *corev1.ConfigMap
	if err := r.phase(ctx, "mark an object to find intact", func(ctx context.Context) (err error) {
		before, err = MarkBefore(ctx, r.c, r.in.Pair.From)
		return err
	}); err != nil {
		return err
	}
	if r.strategy == rollout.StrategyInPlace {
		return r.inPlace(ctx, before)
	}
	return r.surge(ctx, before)
}

// surgePlan is which phases of the surge run the selected promises need:
// a phase runs when it judges a selected promise, or when a later phase
// that runs needs what it leaves (the traffic, a cluster back at all-old).
// With every promise selected, every phase runs.
type surgePlan struct {
	refused, interrupted, window, proxy, faults, variant, traffic, rollback, windowTwo, through, sidecars bool
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
		// The traffic runs when its verdicts are wanted, and then across
		// every transition of a whole run's: a shard that judges it
		// proves no less of it than the run in one piece.
		traffic: needs(partTraffic),
	}
	p.through = needs(partThrough) || p.traffic || p.sidecars
	p.window = needs(partWindow) || needs(partRollback) || p.proxy || p.faults || p.variant || p.windowTwo
	p.windowTwo = p.windowTwo || (p.traffic && p.window)
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

func (r *run) surge(ctx context.Context, before *corev1.ConfigMap) error {
	to := r.in.Pair.To
	plan := r.in.surgePlan()
	if err := r.judgeIn(ctx, partRefused, r.env(before)); err != nil {
		return err
	}
	if err := r.judgeIn(ctx, partInterrupted, r.env(before)); err != nil {
		return err
	}
	if !plan.window {
		// Nothing selected needs the mixed window: from all-old, through.
		return r.surgeThrough(ctx, plan, before)
	}
	if err := r.phase(ctx, fmt.Sprintf("the mixed window: one control plane at %s", to), func(ctx context.Context) error {
		if err := rollout.Roll(ctx, r.c, rollout.RollInput{To: to, Strategy: rollout.StrategySurge, PauseAfter: 1, Images: r.in.Images, Runner: r.runner(nil)}); err != nil {
			return err
		}
		e := r.env(before)
		e.After = "the mixed window"
		if err := r.judgeIn(ctx, partWindow, e); err != nil {
			return err
		}
		newer, err := NewerOnly(ctx, r.c, to)
		if err != nil {
			return err
		}
		r.newerOnly = firstRoutable(newer)
		if r.window, r.windowErr = OpenWindow(ctx, r.c, to, newer); r.windowErr != nil {
			r.cannot(func(id promise.ID) promise.Verdict { return noWindow(id, r.windowErr) }, partProxy, partFaults, partTwoFaults)
			return nil
		}
		if r.stranded, err = Strand(ctx, r.c, r.window); err != nil {
			fmt.Fprintf(r.out, "what a client keeps of the window: %v\n", err)
		}
		e.Window = r.window
		return r.judgeIn(ctx, partProxy, e)
	}); err != nil {
		return err
	}
	if r.window != nil {
		if err := r.judgeIn(ctx, partFaults, r.env(before)); err != nil {
			return err
		}
	}
	if plan.variant {
		e := r.env(before)
		if e.Window == nil {
			var err error
			if e.Window, err = SplitWindow(ctx, r.c, to); err != nil {
				r.cannot(func(id promise.ID) promise.Verdict { return fail(id, "%v", err) }, partVariant)
			}
		}
		if e.Window != nil {
			if err := r.judgeIn(ctx, partVariant, e); err != nil {
				return err
			}
		}
	}
	return r.surgeThrough(ctx, plan, before)
}

// surgeThrough is the surge run from the mixed window on, under the
// traffic when its verdicts are wanted: back to all-old, forward to two
// of three, then through - each part as the plan needs it.
func (r *run) surgeThrough(ctx context.Context, plan surgePlan, before *corev1.ConfigMap) error {
	from, to := r.in.Pair.From, r.in.Pair.To
	if !plan.through && !(plan.window && plan.rollback) {
		return nil // what was selected is judged; the cluster goes as it is
	}
	var load *traffic.Traffic
	if plan.traffic {
		var err error
		if load, err = r.startTraffic(ctx); err != nil {
			return err
		}
		defer load.Delete(context.WithoutCancel(ctx))
	}
	if !plan.window {
		return r.through(ctx, rollout.StrategySurge, load, before)
	}
	if err := r.phase(ctx, fmt.Sprintf("roll back to %s under traffic", from), func(ctx context.Context) error {
		if err := rollout.Rollback(ctx, r.c, rollout.RollbackInput{To: from, Images: r.in.Images, Runner: r.runner(load)}); err != nil {
			return err
		}
		e := r.env(before)
		e.After = "the rollback"
		return r.judgeIn(ctx, partRollback, e)
	}); err != nil {
		return err
	}
	var two *Window
	if r.window != nil && plan.windowTwo {
		if err := r.phase(ctx, fmt.Sprintf("the mixed window again: two control planes at %s, under the traffic", to), func(ctx context.Context) error {
			if err := rollout.Roll(ctx, r.c, rollout.RollInput{To: to, Strategy: rollout.StrategySurge, PauseAfter: 2, Images: r.in.Images, Runner: r.runner(load)}); err != nil {
				return err
			}
			e := r.env(before)
			e.After = "two steps forward"
			if err := r.judgeIn(ctx, partWindowTwo, e); err != nil {
				return err
			}
			var err error
			if two, err = OpenWindow(ctx, r.c, to, []discovery.Resource{r.window.Resource}); err != nil {
				r.cannot(func(id promise.ID) promise.Verdict {
					return promise.Errored(id, "the mixed window with two could not be opened: %v", err)
				}, partTwoFaults)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// Each fault a phase of its own, as in window one: what it restarts is
	// meant on its node only, and a rollout's step means restarts only on
	// the node it acts on.
	if two != nil {
		e := r.env(before)
		e.Window = two
		if err := r.judgeIn(ctx, partTwoFaults, e); err != nil {
			return err
		}
	}
	if !plan.through {
		return nil
	}
	return r.through(ctx, rollout.StrategySurge, load, before)
}

func (r *run) inPlace(ctx context.Context, before *corev1.ConfigMap) error {
	to := r.in.Pair.To
	if err := r.phase(ctx, fmt.Sprintf("load the %s images into every node, before the traffic", to), func(ctx context.Context) error {
		return rollout.StageImages(ctx, r.c, to, r.in.Images)
	}); err != nil {
		return err
	}
	var load *traffic.Traffic
	if r.in.needs(partTraffic, r.strategy) {
		var err error
		if load, err = r.startTraffic(ctx); err != nil {
			return err
		}
		defer load.Delete(context.WithoutCancel(ctx))
	}
	return r.through(ctx, rollout.StrategyInPlace, load, before)
}

// through rolls every control plane to To under the traffic and judges
// it, then, when a check wants them, the native sidecars on kubelets of
// both versions.
func (r *run) through(ctx context.Context, s rollout.Strategy, load *traffic.Traffic, before *corev1.ConfigMap) error {
	to := r.in.Pair.To
	if err := r.phase(ctx, fmt.Sprintf("roll every control plane to %s (%s) under traffic", to, s), func(ctx context.Context) error {
		if err := rollout.Roll(ctx, r.c, rollout.RollInput{To: to, Strategy: s, Images: r.in.Images, Runner: r.runner(load),
			Staged: s == rollout.StrategyInPlace}); err != nil {
			return err
		}
		e := r.env(before)
		e.After = "the rollout"
		if err := r.judgeIn(ctx, partThrough, e); err != nil {
			return err
		}
		if r.stranded != nil {
			if m := r.stranded.AfterThrough(ctx, r.c); m != "" {
				r.measure(allOld, "%s", m)
			}
		}
		r.readComponents(ctx, "end")
		return nil
	}); err != nil {
		return err
	}
	if load == nil {
		// No verdict of the traffic selected (a shard's run): none ran.
	} else if err := r.phase(ctx, "judge the traffic", func(ctx context.Context) error {
		sum, err := load.Stop(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "%s", sum)
		if r.in.Evidence != "" {
			path := filepath.Join(r.in.Evidence, string(r.strategy), "traffic.json")
			if n, err := load.WriteRecords(path); err != nil {
				fmt.Fprintf(r.out, "traffic records: %v\n", err)
			} else {
				fmt.Fprintf(r.out, "%d request records in %s\n", n, path)
			}
		}
		r.disruption, r.steps = sum.Backends, sum.Steps
		e := r.env(before)
		e.Traffic = &sum
		return r.judgeIn(ctx, partTraffic, e)
	}); err != nil {
		return err
	}
	if !r.in.sidecars(s) {
		return nil
	}
	return r.phase(ctx, "native sidecars on kubelets of both versions", func(ctx context.Context) error {
		if r.fixture == nil {
			r.buildFixture(ctx)
		}
		image, err := r.fixture()
		if err != nil {
			return err
		}
		if err := r.c.LoadImages(ctx, image); err != nil {
			return err
		}
		e := r.env(before)
		if e.Sidecars, err = sidecarchecks.New(ctx, r.c, image); err != nil {
			return err
		}
		if r.in.needs(partWorker, s) {
			// The worker's replacement joins beside the other checks.
			defer e.Sidecars.StartWorker(ctx)()
		}
		if err := r.judgeIn(ctx, partSidecars, e); err != nil {
			return err
		}
		return r.judgeIn(ctx, partWorker, e)
	})
}

// buildFixture starts building the sidecar checks' fixture image: built
// cold (a Go build of the fixtures and of an old client-go, minutes on
// two cores) it overlaps the phases before the sidecars, which wait on
// timeouts and restarts more than on the CPU, instead of adding to them.
func (r *run) buildFixture(ctx context.Context) {
	b := r.in.Images.Builder
	if b == nil {
		b = &nodeimage.Builder{Out: r.out}
	}
	done := make(chan struct{})
	var image string
	var err error
	go func() {
		defer close(done)
		image, err = b.FixtureImage(ctx)
	}()
	r.fixture = func() (string, error) {
		<-done
		return image, err
	}
}

func (r *run) startTraffic(ctx context.Context) (*traffic.Traffic, error) {
	var load *traffic.Traffic
	err := r.phase(ctx, "start the traffic", func(ctx context.Context) error {
		opts := traffic.Options{Namespace: "skewer-certify-traffic", NewAPIPath: r.newerOnly}
		var err error
		load, err = traffic.Start(ctx, r.c, opts)
		return err
	})
	return load, err
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

// runner prints a rollout's steps and marks the traffic's phases by them;
// each of its steps means the control plane's restarts on its node.
func (r *run) runner(load *traffic.Traffic) *rollout.Runner {
	m := r.restarting(restarts.ControlPlane)
	runner := &rollout.Runner{Out: r.out, OnStep: func(ctx context.Context, step string) {
		if load != nil {
			if err := load.Phase(ctx, step); err != nil {
				fmt.Fprintf(r.out, "traffic refresh: %v\n", err)
			}
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

func (r *run) result() report.Run {
	out := report.Run{Strategy: string(r.strategy), Shard: strings.Join(r.in.Shard, ","), Cluster: r.in.Name + "-" + string(r.strategy), Phases: r.phases, Disruption: r.disruption, Steps: r.steps, Components: r.components,
		Events: r.events}
	for id, v := range r.verdicts {
		out.Promises = append(out.Promises, report.Result{Verdict: v, Measured: r.measured[id]})
	}
	return out
}

// noWindow is the verdict of a promise judged in the mixed window when
// the window could not be opened (err): not applicable when the pair
// offers no resource only the newer version serves (nothing to route: the
// input rules it out), an error for anything else - an API error is no
// reason to pass over twenty promises.
func noWindow(id promise.ID, err error) promise.Verdict {
	if errors.Is(err, ErrNothingToRoute) {
		return promise.Inapplicable(id, "%v (the runtime-config variant needs none)", err)
	}
	return promise.Errored(id, "the mixed window could not be opened: %v", err)
}
