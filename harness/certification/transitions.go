package certification

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/sidecarchecks"
	"github.com/skewer-k8s/skewer/harness/traffic"
	"github.com/skewer-k8s/skewer/harness/version"
)

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
	r.stopMemory = r.sampleMemory(ctx)
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
		if err := rollout.Roll(ctx, r.c, rollout.RollInput{To: to, Strategy: rollout.StrategySurge, PauseAfter: 1, Images: r.in.Images, Runner: r.runner(nil, false)}); err != nil {
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
	if err := r.rollback(ctx, plan, load, before); err != nil {
		return err
	}
	var two *Window
	if r.window != nil && plan.windowTwo {
		var err error
		if two, err = r.windowTwo(ctx, load, before); err != nil {
			return err
		}
	}
	// Each fault a phase of its own, as in window one: what it restarts is
	// meant on its node only, and a rollout's step means restarts only on
	// the node it acts on.
	if two != nil {
		e := r.env(before)
		e.Window, e.Load = two, load
		if err := r.judgeIn(ctx, partTwoFaults, e); err != nil {
			return err
		}
	}
	if !plan.through {
		return nil
	}
	return r.through(ctx, rollout.StrategySurge, load, before)
}

// rollback returns the cluster from the mixed window to all-From under
// the traffic, after a rollout resumed with a breach on purpose when the
// plan has one.
func (r *run) rollback(ctx context.Context, plan surgePlan, load *traffic.Traffic, before *corev1.ConfigMap) error {
	from := r.in.Pair.From
	name := fmt.Sprintf("roll back to %s under traffic", from)
	breach := plan.halts && load != nil && r.window != nil
	if breach {
		name = fmt.Sprintf("a breach on purpose halts the rollout to %s; %s", r.in.Pair.To, name)
	}
	return r.phase(ctx, name, func(ctx context.Context) error {
		if breach {
			var err error
			if r.halt, err = r.breachOnPurpose(ctx, load, r.window); err != nil {
				return err
			}
		}
		runner, _ := r.guarded(load, fmt.Sprintf("roll back to %s", from), "")
		if err := rollout.Rollback(ctx, r.c, rollout.RollbackInput{To: from, Images: r.in.Images, Runner: runner}); err != nil {
			return err
		}
		e := r.env(before)
		e.After = "the rollback"
		return r.judgeIn(ctx, partRollback, e)
	})
}

// windowTwo rolls two control planes to To under the traffic and opens
// the window they make on window one's resource, for its faults (nil when
// it cannot be opened: they are errors then).
func (r *run) windowTwo(ctx context.Context, load *traffic.Traffic, before *corev1.ConfigMap) (*Window, error) {
	to := r.in.Pair.To
	var two *Window
	err := r.phase(ctx, fmt.Sprintf("the mixed window again: two control planes at %s, under the traffic", to), func(ctx context.Context) error {
		runner, _ := r.guarded(load, fmt.Sprintf("two control planes to %s", to), "")
		if err := rollout.Roll(ctx, r.c, rollout.RollInput{To: to, Strategy: rollout.StrategySurge, PauseAfter: 2, Images: r.in.Images, Runner: runner}); err != nil {
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
	})
	return two, err
}

func (r *run) inPlace(ctx context.Context, before *corev1.ConfigMap) error {
	to := r.in.Pair.To
	if err := r.phase(ctx, fmt.Sprintf("load the %s images into the nodes that run them, before the traffic", to), func(ctx context.Context) error {
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
		runner, _ := r.guarded(load, fmt.Sprintf("every control plane to %s (%s)", to, s), "")
		if err := rollout.Roll(ctx, r.c, rollout.RollInput{To: to, Strategy: s, Images: r.in.Images, Runner: runner,
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
	return r.sidecars(ctx, s, before)
}

// sidecars judges the native sidecars on kubelets of both versions, and
// after them, each in a phase of its own, the checks that change the
// nodes (the eviction order, the worker's replacement) when selected.
func (r *run) sidecars(ctx context.Context, s rollout.Strategy, before *corev1.ConfigMap) error {
	e := r.env(before)
	stop := func() {}
	defer func() { stop() }()
	if err := r.phase(ctx, "native sidecars on kubelets of both versions", func(ctx context.Context) error {
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
		if e.Sidecars, err = sidecarchecks.New(ctx, r.c, image); err != nil {
			return err
		}
		if r.in.needs(partWorker, s) {
			// The worker's replacement joins beside the other checks.
			stop = e.Sidecars.StartWorker(ctx)
		}
		err = r.judgeIn(ctx, partSidecars, e)
		r.canary = e.Sidecars.Compared()
		return err
	}); err != nil {
		return err
	}
	return r.judgeIn(ctx, partWorker, e)
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
