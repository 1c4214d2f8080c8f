// Package suite wires a go test package to one kind cluster on
// e2e-framework: TestMain creates the cluster from a profile (or reuses one
// named by a flag), prints the effective configuration, exports node and
// audit logs when anything failed, and deletes the cluster unless asked to
// keep it - also on Ctrl-C and SIGTERM.
package suite

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/internal/source"
)

var (
	flagCluster     = flag.String("skewer.cluster", "", "reuse this existing cluster instead of creating one (it is kept)")
	flagProfile     = flag.String("skewer.profile", "", "cluster profile (default: the suite's)")
	flagVersion     = flag.String("skewer.version", "", "Kubernetes version of every node (default: the profile's)")
	flagRetain      = flag.Bool("skewer.retain", false, "keep the cluster after the suite")
	flagImageSource = flag.String("skewer.image-source", "build", "node images: build, local or pull")
)

// Suite is one package's cluster and test environment.
type Suite struct {
	Env     env.Environment
	Cluster *cluster.Cluster
	Spec    *cluster.Spec
	// Artifacts is this suite's evidence directory.
	Artifacts string

	created bool
	failed  atomic.Bool
	once    sync.Once
	mu      sync.Mutex
	records []Record
}

// Record is one line of a suite's report.
type Record struct {
	Test string
	// Kind is "finding" (the cluster did something the catalogue does not
	// promise, reported rather than failed) or "measured".
	Kind string
	Text string
}

// Report logs a line of evidence in t and keeps it for the suite's report,
// written to report.md in the evidence directory (and to the GitHub
// Actions step summary when there is one) when the suite ends, pass or fail.
func (s *Suite) Report(t *testing.T, kind, format string, args ...any) {
	t.Helper()
	text := fmt.Sprintf(format, args...)
	t.Logf("%s: %s", strings.ToUpper(kind), text)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, Record{Test: t.Name(), Kind: kind, Text: text})
}

// writeReport writes the records as Markdown, grouped by kind.
func (s *Suite) writeReport() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n", s.Cluster.Name)
	for _, kind := range []string{"finding", "measured"} {
		first := true
		for _, r := range s.records {
			if r.Kind != kind {
				continue
			}
			if first {
				fmt.Fprintf(&b, "\n### %s\n\n", map[string]string{"finding": "Findings", "measured": "Measured"}[kind])
				first = false
			}
			fmt.Fprintf(&b, "- %s  \n  _%s_\n", r.Text, r.Test)
		}
	}
	if err := os.MkdirAll(s.Artifacts, 0o755); err != nil {
		return err
	}
	path := filepath.Join(s.Artifacts, "report.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "suite: report in %s\n%s", path, b.String())
	if summary := os.Getenv("GITHUB_STEP_SUMMARY"); summary != "" {
		f, err := os.OpenFile(summary, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(b.String() + "\n")
		return err
	}
	return nil
}

// LogWriter writes what it is given to t's log, a line per write: the
// progress of a Runner or a Builder, kept with the test it belongs to.
func LogWriter(t *testing.T) io.Writer { return logWriter{t} }

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// Created says whether the suite made its cluster (and so may delete it).
func (s *Suite) Created() bool { return s.created }

// Failed says whether any test of the suite has failed so far.
func (s *Suite) Failed() bool { return s.failed.Load() }

// ArtifactsDir is $ARTIFACTS, else _artifacts at the root of the checkout
// (go test runs in each package's directory), else ./_artifacts.
func ArtifactsDir() string {
	if d := os.Getenv("ARTIFACTS"); d != "" {
		return d
	}
	if root, err := source.Root(); err == nil {
		return filepath.Join(root, "_artifacts")
	}
	return "_artifacts"
}

// Main is the whole TestMain of a suite package using profile.
func Main(m *testing.M, profile string, s **Suite) {
	code, err := run(m, profile, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "suite:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(m *testing.M, profile string, out **Suite) (int, error) {
	cfg, err := envconf.NewFromFlags()
	if err != nil {
		return 1, err
	}
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "suite: skipped in -short mode (needs Docker and a kind cluster)")
		return 0, nil
	}
	if *flagProfile != "" {
		profile = *flagProfile
	}
	s := &Suite{}
	*out = s
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.setup(ctx, profile); err != nil {
		return 1, err
	}
	// Ctrl-C or SIGTERM while tests run: clean up, then leave. (stop, run
	// when the tests are over, also ends ctx; finished tells the two apart.)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-finished:
			return
		case <-ctx.Done():
			select {
			case <-finished: // closed before stop ends ctx
				return
			default:
			}
		}
		fmt.Fprintln(os.Stderr, "suite: interrupted, cleaning up")
		s.teardown(true)
		os.Exit(130)
	}()
	s.Env = env.NewWithConfig(cfg.WithKubeconfigFile(s.Cluster.Kubeconfig()))
	s.Env.AfterEachTest(func(ctx context.Context, _ *envconf.Config, t *testing.T) (context.Context, error) {
		if t.Failed() {
			s.failed.Store(true)
		}
		return ctx, nil
	})
	code := s.Env.Run(m)
	s.teardown(code != 0 || s.Failed())
	return code, nil
}

func (s *Suite) setup(ctx context.Context, profile string) error {
	start := time.Now()
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
		if *flagVersion != "" {
			spec.Version = *flagVersion
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
	s.Artifacts = filepath.Join(ArtifactsDir(), "clusters", s.Cluster.Name)
	s.printConfig(time.Since(start))
	return nil
}

func (s *Suite) printConfig(took time.Duration) {
	eff := map[string]any{
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

// teardown exports evidence when something failed and deletes what this
// suite created unless told to keep it. It runs once, with its own context.
func (s *Suite) teardown(failed bool) {
	s.once.Do(func() {
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
}
