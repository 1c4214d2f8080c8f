package certification

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/guard"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
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
	// checkSteps are the checks each phase ran inside it, as its steps
	// (judgeCheck, judgeTogether), kept under mu: checks run together.
	mu         sync.Mutex
	checkSteps map[string][]report.Phase
	// plan is the strategy's verdicts before any check (Plan).
	plan []promise.Verdict
	// keepSoFar, while the transitions run, is given the run's results
	// as they stand after each phase (soFar), to be written out: a run
	// killed outright (a CI job's timeout ends in SIGKILL) leaves the
	// verdicts judged before its last phase.
	keepSoFar func(run report.Run, after string)
	// began is when the run made its cluster's first phase; last how the
	// same run went here last time it ran whole (timings.go).
	began time.Time
	last  PastRun
	// stopMemory ends the sampling of the run's memory and says its peak.
	stopMemory func() *report.Memory
	memory     *report.Memory
	// canary is the sidecar canary's comparison, once it ran.
	canary *report.Canary
	// guards watch the rollouts made under the traffic; halt is the one
	// with a breach made on purpose (breachOnPurpose).
	guards []*guard.Guard
	halt   *Halt
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
	var at string
	if !r.began.IsZero() {
		at = progress(len(r.phases)+1, start.Sub(r.began), r.last)
	}
	fmt.Fprintf(r.out, "[%s] %s ...%s\n", r.strategy, name, at)
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
	p := report.Phase{Name: name, Start: start, End: time.Now(), Steps: append(r.rolloutSteps(name), r.stepsOf(name)...)}
	r.scrapeMetrics(ctx, "after")
	if err != nil {
		p.Error = err.Error()
		fmt.Fprintf(r.out, "[%s] ✗ %s (%s): %v\n", r.strategy, name, p.End.Sub(start).Round(time.Second), err)
	} else {
		fmt.Fprintf(r.out, "[%s] ✓ %s (%s)\n", r.strategy, name, p.End.Sub(start).Round(time.Second))
	}
	r.phases = append(r.phases, p)
	if r.keepSoFar != nil {
		r.keepSoFar(r.soFar(), name)
	}
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
//
// checkpoint, when set, is given the run's results after each phase of
// the transitions with the phase's name (soFar: what is not judged yet
// is an error saying so), and once every verdict is in with "".
func (r *run) judgeAll(ctx context.Context, checkpoint func(run report.Run, after string)) {
	plan := Plan(r.in)[r.strategy]
	wanted := r.in.makesCluster(r.strategy)
	var err error
	if wanted {
		r.began, r.last = time.Now(), r.in.LastRun(r.strategy)
		r.cutShort = func() bool { return ctx.Err() != nil }
		r.plan, r.keepSoFar = plan, checkpoint
		err = r.transitions(ctx)
		r.cutShort, r.keepSoFar = nil, nil
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
		if r.stopMemory != nil {
			r.memory = r.stopMemory()
		}
	}
	r.judgeTheRest(ctx, plan, err)
	if wanted && checkpoint != nil {
		// Every verdict is in: kept before the export and the deletion,
		// which may take minutes a cancelled CI job does not have.
		checkpoint(r.result(), "")
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
		if err == nil && r.cleanUpErr == nil && ctx.Err() == nil {
			if err := recordTook(TimingsFile(), r.in, r.strategy, PastRun{Took: time.Since(r.began), Phases: len(r.phases)}); err != nil {
				fmt.Fprintf(r.out, "how long the run took is not kept for the next: %v\n", err)
			}
		}
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
