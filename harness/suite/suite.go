// Package suite wires a go test package to one kind cluster on
// e2e-framework: TestMain creates the cluster from a profile (or reuses one
// named by a flag), prints the effective configuration, exports node and
// audit logs when anything failed, and deletes the cluster unless asked to
// keep it. Ctrl-C, SIGTERM and a deadline kept short of go test's -timeout
// cancel the tests' context first, so their cleanups run before teardown.
package suite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/source"
)

var (
	flagCluster     = flag.String("skewer.cluster", "", "reuse this existing cluster instead of creating one (it is kept)")
	flagProfile     = flag.String("skewer.profile", "", "cluster profile (default: the suite's)")
	flagRetain      = flag.Bool("skewer.retain", false, "keep the cluster after the suite")
	flagImageSource = flag.String("skewer.image-source", "build", "node images: build (local, else built offline) or local")
	flagStrict      = flag.Bool("skewer.strict", false, "refuse every waiver: a documented upstream behaviour fails its promise too")
)

var flagVersion version.Version

func init() {
	flag.Var(&flagVersion, "skewer.version", "Kubernetes version of every node (default: the profile's)")
}

// Suite is one package's cluster and test environment.
type Suite struct {
	// Env runs the package's features; every step it runs receives the
	// tests' context, cancelled on Ctrl-C, SIGTERM or the harness deadline.
	Env env.Environment
	// Cluster is nil in a run that needs none (-list, --dry-run).
	Cluster *cluster.Cluster
	Spec    *cluster.Spec
	// Artifacts is this suite's evidence directory.
	Artifacts string

	ctx     context.Context // the tests' context
	created bool
	failed  atomic.Bool
	once    sync.Once
	mu      sync.Mutex
	records []Record
	waivers promise.Waivers
	// also are versions beyond the profile's the suite moves the cluster to.
	also []*version.Version
	// monitor watches the cluster for restarts from the suite's start to
	// its teardown; spans are the features that ran, with what each
	// declared it restarts.
	monitor    *restarts.Monitor
	spans      []restarts.Span
	stopLogs   func()      // ends KeepAPIServerLogs, before the evidence is exported
	unexpected atomic.Bool // cluster.no-unexpected-restarts or cluster.nodes-stay-ready failed
}

// Created says whether the suite made its cluster (and so may delete it).
func (s *Suite) Created() bool { return s.created }

// Failed says whether any test of the suite has failed so far, a restart
// nothing meant was judged, or the suite was stopped (Ctrl-C, SIGTERM, the harness deadline): either way
// the cluster is evidence to export before it goes.
func (s *Suite) Failed() bool {
	return s.failed.Load() || s.unexpected.Load() || (s.ctx != nil && s.ctx.Err() != nil)
}

// artifactsDir is $ARTIFACTS, else _artifacts at the root of the checkout
// (go test runs in each package's directory), else ./_artifacts.
func artifactsDir() string {
	if d := os.Getenv("ARTIFACTS"); d != "" {
		return d
	}
	if root, err := source.Root(); err == nil {
		return filepath.Join(root, "_artifacts")
	}
	return "_artifacts"
}

// Main is the whole TestMain of a suite package using profile.
//
// also are versions the suite moves the cluster to beyond its profile's
// (a rollout's target, read from the suite's own flag once parsed): the
// repository's waivers hold only when they name every version in play.
func Main(m *testing.M, profile string, s **Suite, also ...*version.Version) {
	code, err := run(m, profile, s, also)
	if err != nil {
		fmt.Fprintln(os.Stderr, "suite:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M, profile string, out **Suite, also []*version.Version) (int, error) {
	cfg, err := envconf.NewFromFlags()
	if err != nil {
		return 1, err
	}
	s := &Suite{also: also}
	*out = s
	switch decide(listPattern(), cfg.DryRunMode(), testing.Short()) {
	case skipAll:
		fmt.Fprintln(os.Stderr, "suite: skipped in -short mode (needs Docker and a kind cluster)")
		return 0, nil
	case listOnly:
		return s.runWithoutCluster(m, cfg)
	}
	if *flagProfile != "" {
		profile = *flagProfile
	}
	deadline := budget(goTestTimeout())
	stop := startStopper(deadline, func(cause error) {
		s.teardown(true)
		os.Exit(exitCode(1, cause))
	})
	defer stop.close()
	s.ctx = stop.ctx
	if err := s.setup(s.ctx, profile, deadline); err != nil {
		if cause := context.Cause(s.ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		return exitCode(1, context.Cause(s.ctx)), err
	}
	if s.Env, err = s.newEnv(cfg.WithKubeconfigFile(s.Cluster.Kubeconfig())); err != nil {
		s.teardown(true)
		return 1, err
	}
	code := s.Env.Run(m)
	stop.testsReturned()
	if cause := context.Cause(s.ctx); cause != nil {
		fmt.Fprintf(os.Stderr, "suite: stopped (%v): teardown\n", cause)
	}
	if s.teardown(code != 0 || s.Failed()) && code == 0 {
		code = 1 // a restart nothing meant
	}
	return exitCode(code, context.Cause(s.ctx)), nil
}

// newEnv is the suite's e2e-framework environment on s.ctx: Env.Test hands
// s.ctx (or what a Setup step derives from it) to every step, so
// cancelling it reaches the running step; a test that starts after the
// cancellation is skipped rather than run against a dead context.
func (s *Suite) newEnv(cfg *envconf.Config) (env.Environment, error) {
	e, err := env.NewWithContext(s.ctx, cfg)
	if err != nil {
		return nil, err
	}
	e.BeforeEachTest(func(ctx context.Context, _ *envconf.Config, t *testing.T) (context.Context, error) {
		if ctx.Err() != nil {
			t.Skipf("suite stopped before this test: %v", context.Cause(ctx))
		}
		return ctx, nil
	})
	e.BeforeEachFeature(s.featureStarts)
	e.AfterEachFeature(s.featureEnds)
	e.AfterEachTest(func(ctx context.Context, _ *envconf.Config, t *testing.T) (context.Context, error) {
		if t.Failed() {
			s.failed.Store(true)
		}
		return ctx, nil
	})
	return e, nil
}

func (s *Suite) setup(ctx context.Context, profile string, deadline time.Duration) error {
	start := time.Now()
	root, err := source.Root()
	if err != nil {
		return err
	}
	if s.waivers, err = promise.LoadWaivers(filepath.Join(root, promise.UpstreamFile)); err != nil {
		return err
	}
	if *flagCluster != "" {
		c, err := cluster.Open(ctx, *flagCluster, cluster.Options{})
		if err != nil {
			return err
		}
		s.Cluster, s.Spec = c, c.Spec
	} else {
		path, err := cluster.FindProfile(profile)
		if err != nil {
			return err
		}
		spec, err := cluster.LoadProfile(path)
		if err != nil {
			return err
		}
		if !flagVersion.IsZero() {
			spec.Version = flagVersion
		}
		// One cluster per suite, named after it, so suites never collide.
		if wd, err := os.Getwd(); err == nil {
			spec.Name += "-" + filepath.Base(wd)
		}
		s.Spec = spec
		src, err := nodeimage.ParseSource(*flagImageSource)
		if err != nil {
			return err
		}
		r := &nodeimage.Resolver{Source: src, Out: os.Stderr}
		c, err := cluster.Create(ctx, spec, r.Resolve, cluster.Options{})
		if err != nil {
			return err
		}
		s.Cluster, s.created = c, true
	}
	inPlay := s.Spec.Versions()
	for _, v := range s.also {
		if v != nil && !v.IsZero() {
			inPlay = append(inPlay, *v)
		}
	}
	s.waivers = s.waivers.For(inPlay...)
	s.Artifacts = filepath.Join(artifactsDir(), "clusters", s.Cluster.Name)
	if err := s.watch(ctx); err != nil {
		return err
	}
	s.printConfig(time.Since(start), deadline)
	return nil
}

func (s *Suite) printConfig(took, deadline time.Duration) {
	stopAt := "none (go test has no -timeout)"
	if deadline > 0 {
		stopAt = fmt.Sprintf("%s after start (go test -timeout %s)", deadline, goTestTimeout())
	}
	eff := map[string]any{
		"deadline":   stopAt,
		"cluster":    s.Cluster.Name,
		"created":    s.created,
		"kubeconfig": s.Cluster.Kubeconfig(),
		"artifacts":  s.Artifacts,
		"retain":     *flagRetain,
		"setup":      took.Round(time.Second).String(),
	}
	if s.Spec != nil {
		eff["spec"] = s.Spec
	}
	b, _ := yaml.Marshal(eff)
	fmt.Fprintf(os.Stderr, "--- effective configuration ---\n%s-------------------------------\n", b)
}

// teardown judges the restarts the suite saw, exports evidence when
// something failed and deletes what this suite created unless told to
// keep it. It runs once, with its own context, and says whether the
// suite failed.
func (s *Suite) teardown(failed bool) bool {
	s.once.Do(func() {
		if s.Cluster == nil { // the hard path, while the cluster was being made
			fmt.Fprintln(os.Stderr, "suite: stopped before the cluster was ready: `kind get clusters` shows what was left")
			return
		}
		s.JudgeRestarts()
		if s.stopLogs != nil {
			s.stopLogs()
		}
		failed = failed || s.unexpected.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := s.writeReport(); err != nil {
			fmt.Fprintln(os.Stderr, "suite: report:", err)
		}
		if failed {
			if err := s.Cluster.ExportLogs(ctx, s.Artifacts); err != nil {
				fmt.Fprintln(os.Stderr, "suite:", err)
			}
			fmt.Fprintf(os.Stderr, "suite: evidence in %s\n", s.Artifacts)
		}
		if !s.created || *flagRetain {
			fmt.Fprintf(os.Stderr, "suite: keeping cluster %q (KUBECONFIG=%s)\n", s.Cluster.Name, s.Cluster.Kubeconfig())
			return
		}
		if err := s.Cluster.Delete(ctx, false); err != nil {
			fmt.Fprintln(os.Stderr, "suite:", err)
		}
	})
	return failed
}
