package suite

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/restarts"
)

// RestartsLabel is the feature label that declares what a feature means
// to restart: restarts.ControlPlane, restarts.Workloads, an event's kind
// or a container's name, one label per word. Whatever restarts, crashes
// or is evicted while the suite runs and no running feature declared
// fails cluster.no-unexpected-restarts, and with it the suite.
const RestartsLabel = "restarts"

// watch starts the suite's restart monitor on its cluster.
func (s *Suite) watch(ctx context.Context) error {
	cs, err := s.Cluster.Client()
	if err != nil {
		return err
	}
	if s.monitor, err = restarts.Start(ctx, cs); err != nil {
		return fmt.Errorf("the restart monitor: %w", err)
	}
	s.stopLogs = s.Cluster.KeepAPIServerLogs(ctx)
	return nil
}

// featureStarts opens the span of the feature now running, with what its
// label says it restarts.
func (s *Suite) featureStarts(ctx context.Context, _ *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.monitor != nil {
		name := t.Name() + "/" + f.Name()
		s.monitor.Phase(name)
		s.spans = append(s.spans, restarts.Span{Name: name, Start: time.Now(), Restarts: f.Labels()[RestartsLabel]})
	}
	return ctx, nil
}

// featureEnds closes the span of the feature that ran.
func (s *Suite) featureEnds(ctx context.Context, _ *envconf.Config, _ *testing.T, _ features.Feature) (context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.monitor != nil {
		s.monitor.Phase("between features")
		s.spans[len(s.spans)-1].End = time.Now()
	}
	return ctx, nil
}

// JudgeRestarts stops the monitor and judges what it saw against what
// the features declared (cluster.no-unexpected-restarts and
// cluster.nodes-stay-ready); the verdicts go to the report, and a failure
// fails the suite. Teardown calls it; a test that deletes the cluster
// calls it first. Only the first call judges.
func (s *Suite) JudgeRestarts() {
	s.mu.Lock()
	m := s.monitor
	s.monitor = nil
	spans := append([]restarts.Span(nil), s.spans...)
	s.mu.Unlock()
	if m == nil {
		return
	}
	for i := range spans {
		if spans[i].End.IsZero() { // stopped in the middle of the feature
			spans[i].End = time.Now()
		}
	}
	auditLogs, _ := s.Cluster.AuditLogs() // none: a node's cause is unknown, and says so
	for _, v := range m.Judge(restarts.Meant(spans), auditLogs) {
		v, err := judge(s.waivers, *flagStrict, v)
		fmt.Fprintf(os.Stderr, "suite: VERDICT %s: %s %s\n", v.ID, v.Outcome, v.Reason)
		if v.Outcome != promise.Pass {
			for _, e := range v.Evidence {
				fmt.Fprintf(os.Stderr, "  %s\n", e)
			}
		}
		s.mu.Lock()
		s.records = append(s.records, Record{Test: "the whole suite", Verdict: &v})
		s.mu.Unlock()
		if err != nil {
			s.unexpected.Store(true)
		}
	}
}

// Events are what the suite's monitor has seen so far.
func (s *Suite) Events() []restarts.Event {
	s.mu.Lock()
	m := s.monitor
	s.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.Events()
}
