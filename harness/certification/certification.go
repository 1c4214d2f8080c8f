// Package certification runs `skewer certify`: a version pair taken through
// each strategy on a real HA cluster of its own, under traffic, with every
// promise of the catalogue given one verdict per run. The checks are
// functions over a cluster that return verdicts (checks.go), so the suites
// can judge with the same ones.
//
// What it runs today, per strategy:
//   - surge: create at From; one control plane at To (the mixed window),
//     discovery converging; a rollback to all-From under traffic; the
//     rollout carried through under the same traffic.
//   - in-place: create at From; every control plane upgraded where it
//     stands, under traffic.
//
// A promise a strategy's run does not judge is not applicable to it,
// with the rule; one no run judges is an error.
package certification

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// Input is one certification, validated before anything is built or
// created.
type Input struct {
	Pair       promise.Pair
	Strategies []rollout.Strategy
	// Only, when set, are the promises to judge; Skip are left out. The
	// rest are not selected: not run, not counted.
	Only, Skip []promise.ID
	// Shard, when set, is the areas of the catalogue this machine judges
	// of a certification split across several (--shard proxy): the
	// promises of the other areas are not selected here, and the phases
	// only they need do not run. The cluster's own promises (restarts,
	// nodes Ready) are judged by every shard of its own run. skewer
	// report merge joins the shards' results.
	Shard   []string
	Waivers promise.Waivers
	// Strict refuses every waiver.
	Strict bool
	// Profile is the cluster every run starts from (its version is set to
	// the pair's From, its name to Name-<strategy>).
	Profile *cluster.Spec
	Name    string
	// Images resolves both versions' node images before any cluster is made.
	Images *nodeimage.Resolver
	// Retain keeps each run's cluster.
	Retain bool
	// Evidence, when set, receives each run's node logs and audit logs
	// (<Evidence>/<strategy>/logs, .../audit) before its cluster goes.
	Evidence string
	Out      io.Writer
	// FeatureGates are a distribution's apiserver feature gates for each
	// side of the pair: its own configuration of its build, set on the
	// apiservers of that version only and recorded with the results.
	FeatureGates map[version.Version]map[string]bool
	// Budget bounds what a rollout may cost the traffic
	// (rollout.disruption-budget).
	Budget promise.Budget
	// Guard are the rollout guard's thresholds (nil: promise.DefaultGuard).
	Guard *promise.GuardThresholds
	// Checkpoint, when set, is given the results as they stand after each
	// phase of a run (what is not judged yet an error that says so) and
	// each time a run's verdicts are all in, before its evidence is
	// exported and its cluster deleted (each may take minutes): what a
	// cancelled CI job, given seconds to stop - or a killed one, none -
	// still publishes. Incomplete unless it is the last run's, all in,
	// and the run was not interrupted; Run's own results follow.
	Checkpoint func(*report.Results) error
	// Verbosity is kind's log level while clusters are made (cluster.Options).
	Verbosity int
	Tool      report.Tool
}

// Validate refuses input a certification cannot run.
func (in Input) Validate() error {
	var errs []error
	if err := in.Pair.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(in.Strategies) == 0 {
		errs = append(errs, errors.New("no strategy: want surge, in-place or both"))
	}
	for _, s := range in.Strategies {
		if _, err := rollout.ParseStrategy(string(s)); err != nil {
			errs = append(errs, err)
		}
	}
	if in.Guard != nil {
		if err := in.Guard.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	for v := range in.FeatureGates {
		if !v.Equal(in.Pair.From) && !v.Equal(in.Pair.To) {
			errs = append(errs, fmt.Errorf("feature gates for %s, which is neither side of %s", v, in.Pair))
		}
	}
	for _, id := range append(slices.Clone(in.Only), in.Skip...) {
		if _, ok := promise.Lookup(id); !ok {
			errs = append(errs, fmt.Errorf("%q is not a promise of the catalogue (skewer certify --list shows them)", id))
		}
	}
	if len(in.Shard) > 0 && len(in.Only) > 0 {
		errs = append(errs, errors.New("--shard and --only both choose the promises to judge: give one"))
	}
	areas := promise.Areas()
	for _, a := range in.Shard {
		if !slices.Contains(areas, a) {
			errs = append(errs, fmt.Errorf("shard %q is not an area of the catalogue (want some of %v)", a, areas))
		}
	}
	if err := in.Budget.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("budget: %w", err))
	}
	if in.Profile == nil {
		errs = append(errs, errors.New("no cluster profile"))
	} else if in.Profile.ControlPlanes < 3 {
		errs = append(errs, fmt.Errorf("profile %s has %d control plane(s): a rolling replacement needs 3", in.Profile.Name, in.Profile.ControlPlanes))
	}
	if len(errs) == 0 && len(in.clusterRuns()) == 0 {
		// A certification that judges nothing would pass on no evidence.
		var runs []string
		for _, s := range in.Strategies {
			runs = append(runs, "the "+string(s)+" run")
		}
		errs = append(errs, fmt.Errorf("the selection leaves nothing to judge: %s judges none of it (skewer certify --dry-run says what each run judges)", strings.Join(runs, " and ")))
	}
	if in.Name == "" || in.Images == nil {
		errs = append(errs, errors.New("a certification needs a cluster name and an image resolver"))
	}
	return errors.Join(errs...)
}

// selected says whether id is to be judged, and if not, why.
func (in Input) selected(id promise.ID) (bool, string) {
	if slices.Contains(in.Skip, id) {
		return false, "left out by --skip"
	}
	if len(in.Only) > 0 && !slices.Contains(in.Only, id) {
		return false, "not among --only"
	}
	if a := id.Area(); len(in.Shard) > 0 && a != "cluster" && !slices.Contains(in.Shard, a) {
		return false, fmt.Sprintf("another shard's: this one judges %v", in.Shard)
	}
	return true, ""
}

// notJudged is the verdict of a promise a strategy's run does not judge:
// not applicable when the strategy does not take the path it needs (the
// surge run judges it), an error when no run proves it - a promise of the
// catalogue certify cannot judge is a hole, not a skip.
func notJudged(id promise.ID, s rollout.Strategy) promise.Verdict {
	if slices.Contains(checkedBy(rollout.StrategySurge), id) {
		return promise.Inapplicable(id, "the %s strategy holds no mixed window, fault or sidecar phase for it: the surge run judges it", s)
	}
	return promise.Errored(id, "no check of certify judges it")
}

// Plan is what each run will judge, by strategy (outcome pass: to be
// judged), and why the rest is not: what --dry-run prints.
func Plan(in Input) map[rollout.Strategy][]promise.Verdict {
	out := map[rollout.Strategy][]promise.Verdict{}
	for _, s := range in.Strategies {
		for _, p := range promise.Catalogue() {
			v := promise.Verdict{ID: p.ID, Outcome: promise.Pass}
			if ok, why := in.selected(p.ID); !ok {
				v = promise.Verdict{ID: p.ID, Outcome: promise.NotSelected, Reason: why}
			} else if !slices.Contains(checkedBy(s), p.ID) {
				v = notJudged(p.ID, s)
			}
			out[s] = append(out[s], v)
		}
	}
	return out
}

// CheckImages refuses, before anything is built, a pair one of whose
// node images cannot be had (a version the Go module proxy does not
// serve): both versions are asked first, so a bad --to does not cost the
// build of --from's image.
func (in Input) CheckImages(ctx context.Context) error {
	for _, v := range []version.Version{in.Pair.From, in.Pair.To} {
		if err := in.Images.Check(ctx, v); err != nil {
			return err
		}
	}
	if slices.Contains(in.Strategies, rollout.StrategyInPlace) {
		return in.Images.CheckInPlace(in.Pair.To)
	}
	return nil
}

// given is what the user brought for v, for the results' provenance; nil
// for skewer's own build.
func given(images *nodeimage.Resolver, v version.Version) *report.Given {
	if rel, ok := images.Releases[v]; ok {
		return &report.Given{Kind: rel.Kind(), Path: rel.Path, SHA256: rel.SHA256, Commit: rel.Commit, Dirty: rel.Dirty, Binaries: rel.Binaries}
	}
	if _, ok := images.Given[v]; ok {
		return &report.Given{Kind: "node-image"}
	}
	return nil
}

// makesCluster says whether the run of strategy s makes a cluster: it
// judges a selected promise.
func (in Input) makesCluster(s rollout.Strategy) bool {
	return slices.Contains(in.clusterRuns(), s)
}

// clusterRuns are the strategies whose runs make a cluster, in order.
func (in Input) clusterRuns() []rollout.Strategy {
	plan := Plan(in)
	var out []rollout.Strategy
	for _, s := range in.Strategies {
		if slices.ContainsFunc(plan[s], func(v promise.Verdict) bool { return v.Outcome == promise.Pass }) {
			out = append(out, s)
		}
	}
	return out
}

// Run certifies the pair: the node images of both versions first (nothing
// is created if one cannot be had), then each strategy on its own cluster.
// A run that cannot go on fails the promises it had not judged yet, with
// the reason; the results are returned whole either way.
func Run(ctx context.Context, in Input) (*report.Results, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if err := in.CheckImages(ctx); err != nil {
		return nil, err
	}
	// A waiver holds only for the versions it names.
	in.Waivers = in.Waivers.For(in.Pair.From, in.Pair.To)
	res := report.New(in.Pair, in.Tool, time.Now())
	res.Strict = in.Strict
	res.Host = host(ctx)
	res.Budget = &in.Budget
	thresholds := in.thresholds()
	res.GuardThresholds = &thresholds
	images, err := resolveImages(ctx, in, res)
	if err != nil {
		return nil, err
	}
	var newerOnly string
	var cleanUp []error
	for i, s := range in.Strategies {
		r := &run{in: in, strategy: s, out: in.Out, images: images, newerOnly: newerOnly}
		r.judgeAll(ctx, keeper(ctx, in, res, i))
		res.Runs = append(res.Runs, r.result())
		cleanUp = append(cleanUp, r.cleanUpErr)
		if r.newerOnly != "" {
			newerOnly = r.newerOnly
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		res.Incomplete = fmt.Sprintf("interrupted after %d of %d run(s): %v", len(res.Runs), len(in.Strategies), context.Cause(ctx))
	}
	err = res.Finish(time.Now())
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	// The verdicts stand whatever the clean-up did; the error says what
	// it left (evidence not exported, a cluster not deleted).
	return res, errors.Join(err, errors.Join(cleanUp...))
}

// resolveImages resolves both versions' node images, each recorded in
// res with its image ID and what it was built from.
func resolveImages(ctx context.Context, in Input, res *report.Results) (map[version.Version]string, error) {
	images := map[version.Version]string{}
	for _, v := range []version.Version{in.Pair.From, in.Pair.To} {
		ref, err := in.Images.Resolve(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("node image for %s: %w", v, err)
		}
		images[v] = ref
		id, err := docker.ImageID(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("node image for %s: %w", v, err)
		}
		res.Images = append(res.Images, report.NodeImage{Version: v.String(), Ref: ref, ID: id, Key: nodeimage.InputKey(ctx, ref), Given: given(in.Images, v),
			FeatureGates: in.FeatureGates[v]})
	}
	return images, nil
}

// keeper gives in.Checkpoint the results as they stand while the i-th
// run goes on (checkpoint); nil without a Checkpoint.
func keeper(ctx context.Context, in Input, res *report.Results, i int) func(report.Run, string) {
	if in.Checkpoint == nil {
		return nil
	}
	return func(run report.Run, after string) {
		var cut error
		if ctx.Err() != nil {
			cut = context.Cause(ctx)
		}
		part, err := checkpoint(res, run, in.Strategies, i, after, cut, time.Now())
		if err == nil {
			err = in.Checkpoint(part)
		}
		if err != nil && in.Out != nil {
			fmt.Fprintf(in.Out, "results kept so far: %v\n", err)
		}
	}
}

// checkpoint is the results so far - res, with run, the i-th of
// strategies - as they stand at now: after its phase named after, or
// (after "") with its verdicts all in, before its evidence is exported
// and its cluster deleted. Incomplete while the run goes on, when cut
// (the interrupt), or when runs are still to come.
func checkpoint(res *report.Results, run report.Run, strategies []rollout.Strategy, i int, after string, cut error, now time.Time) (*report.Results, error) {
	part := *res
	part.Runs = append(slices.Clone(res.Runs), run)
	switch {
	case after != "":
		part.Incomplete = fmt.Sprintf("kept during run %d of %d, after its phase %q: the run went on", i+1, len(strategies), after)
	case cut != nil:
		part.Incomplete = fmt.Sprintf("interrupted in run %d of %d (%v): kept before its evidence was exported and its cluster deleted", i+1, len(strategies), cut)
	case i < len(strategies)-1:
		part.Incomplete = fmt.Sprintf("kept after run %d of %d: the %s run was still to come", i+1, len(strategies), strategies[i+1])
	}
	return &part, part.Finish(now)
}
