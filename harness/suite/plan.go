package suite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// plan is what a run of a suite package does.
type plan int

const (
	// withCluster creates (or reuses) the cluster and runs the tests on it.
	withCluster plan = iota
	// listOnly makes no cluster and builds nothing: go test -list prints
	// the tests' names, e2e-framework's --dry-run walks every feature and
	// assessment it would run and skips their steps.
	listOnly
	// skipAll runs nothing: -short promises no Docker.
	skipAll
)

// decide says whether a run needs a cluster, from go test's -list pattern,
// e2e-framework's --dry-run and go test's -short. Listing wins over -short
// so that go test -short -list still lists.
func decide(list string, dryRun, short bool) plan {
	switch {
	case list != "" || dryRun:
		return listOnly
	case short:
		return skipAll
	}
	return withCluster
}

// listPattern is go test's -list, "" when not listing.
func listPattern() string {
	if f := flag.Lookup("test.list"); f != nil {
		return f.Value.String()
	}
	return ""
}

// runWithoutCluster runs the tests in e2e-framework's dry-run mode, which
// skips every step and every Setup, Finish and Before/After hook, so
// nothing reaches for s.Cluster (nil here). With -list, m.Run only lists.
func (s *Suite) runWithoutCluster(m *testing.M, cfg *envconf.Config) (int, error) {
	if listPattern() == "" {
		fmt.Fprintln(os.Stderr, "suite: --dry-run: no cluster, nothing built; features and assessments are walked, no step runs")
	}
	s.ctx = context.Background()
	var err error
	if s.Env, err = s.newEnv(cfg.WithDryRunMode()); err != nil {
		return 1, err
	}
	return s.Env.Run(m), nil
}
