package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/source"
)

type certifyFlags struct {
	from, to, strategy, out, waivers, name, profile string
	guardFile                                       string
	only, skip, gates, shard, ignorePreflight       []string
	guard                                           []string
	images                                          givenFlags
	maxFailed                                       float64
	maxUnavailable, maxUnavailableReused, deadline  time.Duration
	strict, retain, dryRun, list, force             bool
}

func certifyCommand() *cobra.Command {
	var f certifyFlags
	cmd := &cobra.Command{
		Use:   "certify",
		Short: "Certify a version pair: every promise of the catalogue judged on real kind clusters, and a report to publish",
		Long: `certify takes an HA cluster at --from through the upgrade to --to, one cluster per strategy:
surge (one control plane at --to, the mixed window, a rollback under traffic, then through under
the same traffic) and in-place (kubeadm upgrades each control plane where it stands, under traffic).
Every promise of the catalogue gets one verdict per strategy: pass, fail, waived (a failure whose
cause a detector found in its evidence, a documented upstream behaviour of the versions in play,
with its reference), error (the check could not run: counts as a failure), not-applicable (the
strategy or the pair rules it out, with the rule) or not-selected (--only, --skip). The run
passes only when every applicable, selected promise passed or was waived; a run cut short is
incomplete, never a pass. The last line printed states the outcome and the coverage. --out
receives results.json (its schema: harness/report/results.schema.json), junit.xml, summary.md
and report.html.

A side may be a build of your own instead of skewer's from the Go module proxy: --node-image to=REF
(a node image on this machine, used as it is: surge only) or --kubernetes to=PATH (a server release
tarball, a directory of its binaries, or a source tree built here, made into a node image; both
strategies). Its version is read from what was given, and results.json records what it was (the
sha256 of each binary; a tree's commit and whether it had changes).

The pair is checked before anything is built or created: adjacent minors, forward. The exit status
is 1 when any promise failed, and when the evidence could not be exported or the cluster deleted
(the verdicts stand; the message says what was left).`,
		Args: cobra.NoArgs,
		Example: `  skewer certify --from v1.35.4 --to v1.36.3
  skewer certify --from v1.36.3 --to v1.37.2 --strategy surge --out results/
  skewer certify --from v1.35.4 --kubernetes to=./kubernetes-server-linux-amd64.tar.gz --strategy in-place
  skewer certify --from v1.35.4 --to v1.36.3 --strategy surge --shard sidecar --out shard-sidecar/
  skewer certify --from v1.35.4 --to v1.36.3 --dry-run
  skewer certify --list`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.list {
				return listCatalogue(cmd.OutOrStdout())
			}
			in, err := certifyInput(cmd.Context(), f, cmd.ErrOrStderr())
			if err != nil {
				return badInput(err)
			}
			if err := in.CheckImages(cmd.Context()); err != nil {
				return badInput(err)
			}
			// A dry run refuses the --out the run would, and touches
			// nothing; the preflight reads this machine for both, before
			// --out is touched: a refusal changes nothing.
			if err := outDir(f.out, f.force, true); err != nil {
				return badInput(fmt.Errorf("--out: %w", err))
			}
			checks, err := in.Preflight(cmd.Context(), f.out, f.ignorePreflight)
			if f.dryRun {
				printPlan(cmd.OutOrStdout(), in)
				fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", strings.Join(checks, "\n"))
			}
			if err != nil {
				return badInput(err)
			}
			if f.dryRun {
				return nil
			}
			fmt.Fprintln(cmd.ErrOrStderr(), strings.Join(checks, "\n"))
			if err := outDir(f.out, f.force, false); err != nil {
				return badInput(fmt.Errorf("--out: %w", err))
			}
			ctx := cmd.Context()
			if f.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeoutCause(ctx, f.deadline, fmt.Errorf("its --deadline of %s passed", f.deadline))
				defer cancel()
			}
			res, err := certification.Run(ctx, in)
			if res != nil {
				if werr := res.Write(f.out); werr != nil {
					return errors.Join(err, werr)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s\nresults in %s (results.json, junit.xml, summary.md, report.html; evidence/: node and audit logs)\n", res.Summary(), f.out)
				// The last line says the verdict and what it covers, even with -q.
				fmt.Fprintln(cmd.OutOrStdout(), res.Headline())
			}
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
				// Not an interrupt (130): the run stopped itself, reported
				// and cleaned up, and is incomplete - a failure to a CI job.
				return fmt.Errorf("certification of %s: incomplete, %w (%s)", in.Pair, context.Cause(ctx), filepath.Join(f.out, report.SummaryFile))
			}
			if err != nil {
				return err
			}
			if res.Outcome != promise.Pass {
				c := res.Counts()
				return fmt.Errorf("certification of %s: %s, %d promise(s) failed, %d could not be judged (%s)", in.Pair, res.Outcome, c[promise.Fail], c[promise.Error], filepath.Join(f.out, report.SummaryFile))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "the version the clusters start at (required); a minor alone (1.35) is its newest node image here, else its newest release the Go module proxy serves")
	fl.StringVar(&f.to, "to", "", "the next minor's version they upgrade to (required; a minor alone as for --from)")
	fl.StringVar(&f.strategy, "strategy", "both", "surge, in-place or both")
	fl.StringVar(&f.out, "out", "skewer-results", "directory for results.json, junit.xml, summary.md and report.html")
	fl.StringSliceVar(&f.only, "only", nil, "judge only these promise IDs (the rest are not selected: not run, not counted)")
	fl.StringSliceVar(&f.skip, "skip", nil, "leave these promise IDs out")
	fl.StringSliceVar(&f.shard, "shard", nil, "judge only these areas of the catalogue (proxy, rollout, sidecar), and the cluster's own promises, running only the phases they need: one shard of a certification split across machines, joined by skewer report merge into one certification")
	fl.StringArrayVar(&f.gates, "apiserver-feature-gates", nil, "SIDE:GATE=BOOL[,GATE=BOOL] - feature gates of your build's apiservers on one side (from or to) of the pair, e.g. to:UnknownVersionInteroperabilityProxy=false; set on that version's apiservers only, recorded in results.json")
	fl.StringVar(&f.waivers, "waivers", "", "a file of your own waivers, added to the repository's (clusters/waivers/upstream.yaml)")
	fl.BoolVar(&f.strict, "strict", false, "refuse every waiver: documented upstream behaviour fails its promise too")
	fl.BoolVar(&f.retain, "retain", false, "keep each run's cluster")
	fl.DurationVar(&f.deadline, "deadline", 0, "stop the certification this long after it starts, as Ctrl-C would, and report it incomplete (exit 1): under a CI job's timeout, leave time after it to export the evidence and delete the cluster (about a minute, at most 5 each); 0: none")
	fl.BoolVar(&f.force, "force", false, "replace an earlier run's results and evidence in --out (refused without it: two runs' evidence must not mix)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "check the input and this machine (the preflight) and print what each run would judge; build and create nothing")
	fl.StringSliceVar(&f.ignorePreflight, "ignore-preflight-errors", nil, "preflight checks that report and do not refuse: "+strings.Join(certification.PreflightChecks, ", ")+", or all")
	fl.BoolVar(&f.list, "list", false, "print the catalogue of promises and exit")
	fl.StringVar(&f.name, "name", "skewer-certify", "cluster name prefix (each run adds -<strategy>)")
	fl.StringVar(&f.profile, "profile", "ha", "the cluster profile each run starts from (3 control planes)")
	fl.Float64Var(&f.maxFailed, "max-failed", 100*promise.DefaultBudget.MaxFailed, "rollout.disruption-budget: the percentage of requests through the load balancer that may fail (5xx, 403 or no response), on new and on reused connections")
	fl.DurationVar(&f.maxUnavailable, "max-unavailable", promise.DefaultBudget.MaxUnavailable, "rollout.disruption-budget: the longest the load balancer may turn new connections away (0: measured, not bounded)")
	fl.DurationVar(&f.maxUnavailableReused, "max-unavailable-reused", promise.DefaultBudget.MaxUnavailableReused, "the same for a kept-alive connection, which each rollout step moves off its backend before stopping it (0: measured, not bounded)")
	fl.StringVar(&f.guardFile, "guard-file", "", "the rollout guard's thresholds from a YAML file (docs/guard-thresholds.yaml holds the defaults; a name it leaves out keeps its default)")
	fl.StringArrayVar(&f.guard, "guard", nil, "NAME=VALUE - one rollout guard threshold, over --guard-file: "+strings.Join(promise.GuardNames(), ", ")+" (docs/guard.md)")
	f.images.add(fl, "from=, to= or ")
	return cmd
}

// thresholds are the rollout guard's: the defaults, then --guard-file's,
// then each --guard.
func (f certifyFlags) thresholds() (*promise.GuardThresholds, error) {
	th := promise.DefaultGuard
	var err error
	if f.guardFile != "" {
		if th, err = th.Load(f.guardFile); err != nil {
			return nil, err
		}
	}
	for _, set := range f.guard {
		if th, err = th.Set(set); err != nil {
			return nil, err
		}
	}
	return &th, nil
}

// certifyInput checks every flag before anything is built or created.
func certifyInput(ctx context.Context, f certifyFlags, progress io.Writer) (certification.Input, error) {
	// A minor alone (1.35) is one of its releases, said as it is taken.
	for _, side := range []struct {
		flag string
		v    *string
	}{{"--from", &f.from}, {"--to", &f.to}} {
		v, found, err := nodeimage.Patch(ctx, *side.v)
		if err != nil {
			return certification.Input{}, fmt.Errorf("%s %w", side.flag, err)
		}
		if !v.IsZero() {
			fmt.Fprintf(progress, "%s %s is %s, %s\n", side.flag, *side.v, v, found)
			*side.v = v.String()
		}
	}
	sides := map[string]version.Version{}
	for key, flag := range map[string]string{"from": f.from, "to": f.to} {
		if flag == "" {
			sides[key] = version.Version{}
			continue
		}
		v, err := version.Parse(flag)
		if err != nil {
			return certification.Input{}, fmt.Errorf("--%s: %w", key, err)
		}
		sides[key] = v
	}
	images, chosen, err := f.images.resolver(ctx, progress, sides)
	if err != nil {
		return certification.Input{}, err
	}
	if v := chosen["from"]; f.from == "" && !v.IsZero() {
		f.from = v.String()
	}
	if v := chosen["to"]; f.to == "" && !v.IsZero() {
		f.to = v.String()
	}
	for _, name := range f.ignorePreflight {
		if name != "all" && !slices.Contains(certification.PreflightChecks, name) {
			return certification.Input{}, fmt.Errorf("--ignore-preflight-errors %s: not a preflight check (want some of %s, or all)", name, strings.Join(certification.PreflightChecks, ", "))
		}
	}
	if f.deadline < 0 {
		return certification.Input{}, fmt.Errorf("--deadline %s: want a positive duration, as 50m, or 0 for none", f.deadline)
	}
	if f.from == "" || f.to == "" {
		return certification.Input{}, errors.New("certify needs --from and --to, e.g. --from v1.35.4 --to v1.36.3")
	}
	pair, err := promise.ParsePair(f.from, f.to)
	if err != nil {
		return certification.Input{}, err
	}
	var strategies []rollout.Strategy
	if f.strategy == "both" {
		strategies = []rollout.Strategy{rollout.StrategySurge, rollout.StrategyInPlace}
	} else {
		s, err := rollout.ParseStrategy(f.strategy)
		if err != nil {
			return certification.Input{}, fmt.Errorf("--strategy: %w (or both)", err)
		}
		strategies = []rollout.Strategy{s}
	}
	root, err := source.Root()
	if err != nil {
		return certification.Input{}, err
	}
	files := []string{filepath.Join(root, promise.UpstreamFile)}
	if f.waivers != "" {
		files = append(files, f.waivers)
	}
	ws, err := promise.LoadWaivers(files...)
	if err != nil {
		return certification.Input{}, err
	}
	for _, w := range ws {
		if w.Renamed != "" {
			fmt.Fprintf(progress, "note: %s\n", w.Renamed)
		}
	}
	path, err := cluster.FindProfile(f.profile)
	if err != nil {
		return certification.Input{}, err
	}
	spec, err := cluster.LoadProfile(path)
	if err != nil {
		return certification.Input{}, err
	}
	gates, err := sideGates(f.gates, pair)
	if err != nil {
		return certification.Input{}, err
	}
	thresholds, err := f.thresholds()
	if err != nil {
		return certification.Input{}, err
	}
	in := certification.Input{
		Pair: pair, Strategies: strategies, Only: canonical(f.only, progress, promise.Canonical), Skip: canonical(f.skip, progress, promise.Canonical), Shard: canonical(f.shard, progress, promise.CanonicalArea), Waivers: ws, Strict: f.strict,
		Profile: spec, Name: f.name, Images: images,
		Budget: promise.Budget{MaxFailed: f.maxFailed / 100, MaxUnavailable: f.maxUnavailable, MaxUnavailableReused: f.maxUnavailableReused},
		Guard:  thresholds,
		Retain: f.retain, Evidence: filepath.Join(f.out, evidenceDir), Out: progress, Verbosity: global.verbosity, Tool: toolInfo(),
		FeatureGates: gates,
		// Rewritten once the evidence is exported and the cluster gone.
		Checkpoint: func(r *report.Results) error { return r.Write(f.out) },
	}
	return in, in.Validate()
}

// canonical reads each of s, trimmed, under its current name (read:
// promise.Canonical, promise.CanonicalArea); a renamed one is noted on w.
func canonical[T ~string](s []string, w io.Writer, read func(T) (T, string)) []T {
	var out []T
	for _, v := range s {
		now, note := read(T(strings.TrimSpace(v)))
		if note != "" {
			fmt.Fprintf(w, "note: %s\n", note)
		}
		out = append(out, now)
	}
	return out
}

func listCatalogue(w io.Writer) error {
	for _, p := range promise.Catalogue() {
		if _, err := fmt.Fprintf(w, "%-38s %s\n", p.ID, p.Statement); err != nil {
			return err
		}
	}
	return nil
}

// printPlan says, per strategy, what a run would judge and why the rest
// is not, grouped by outcome and reason.
func printPlan(w io.Writer, in certification.Input) {
	fmt.Fprintf(w, "certify %s\n", in.Pair)
	plan := certification.Plan(in)
	for _, s := range in.Strategies {
		var judged []string
		notJudged := map[string][]string{}
		for _, v := range plan[s] {
			if v.Outcome != promise.Pass {
				why := string(v.Outcome) + ", " + v.Reason
				notJudged[why] = append(notJudged[why], string(v.ID))
			} else {
				judged = append(judged, string(v.ID))
			}
		}
		if len(judged) == 0 {
			fmt.Fprintf(w, "\n%s run: judges nothing, makes no cluster\n", s)
		} else {
			var last string
			if l := in.LastRun(s); l.Took > 0 {
				last = fmt.Sprintf("; the last whole run of these parts here took %s", l)
			}
			fmt.Fprintf(w, "\n%s run on cluster %s-%s: %s; judges %d promise(s)%s\n  %s\n", s, in.Name, s, strings.Join(in.Parts(s), ", "), len(judged), last, strings.Join(judged, "\n  "))
		}
		var reasons []string
		for r := range notJudged {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			fmt.Fprintf(w, "%s:\n  %s\n", r, strings.Join(notJudged[r], "\n  "))
		}
	}
}

// sideGates reads --apiserver-feature-gates: SIDE:GATE=BOOL[,GATE=BOOL],
// SIDE from or to.
func sideGates(flags []string, pair promise.Pair) (map[version.Version]map[string]bool, error) {
	out := map[version.Version]map[string]bool{}
	for _, f := range flags {
		side, list, ok := strings.Cut(f, ":")
		v := map[string]version.Version{"from": pair.From, "to": pair.To}[side]
		if !ok || v.IsZero() {
			return nil, fmt.Errorf("--apiserver-feature-gates %q: want from:GATE=BOOL or to:GATE=BOOL", f)
		}
		for _, g := range strings.Split(list, ",") {
			name, value, ok := strings.Cut(strings.TrimSpace(g), "=")
			on, err := strconv.ParseBool(value)
			if !ok || name == "" || err != nil {
				return nil, fmt.Errorf("--apiserver-feature-gates %q: %q is not GATE=true or GATE=false", f, g)
			}
			if out[v] == nil {
				out[v] = map[string]bool{}
			}
			out[v][name] = on
		}
	}
	return out, nil
}
