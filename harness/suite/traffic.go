package suite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/traffic"
	"github.com/skewer-k8s/skewer/harness/version"
)

// Load is continuous traffic through the transitions of one or more
// features: the rollout promises (no acknowledged write lost, no watch
// event missed, no false 404) are judged on it when it stops.
type Load struct {
	s  *Suite
	tr *traffic.Traffic
	// From is the cluster's version when the traffic started.
	From version.Version
}

// StartTraffic starts traffic through the suite's cluster, its objects in
// namespace. The collection only newer apiservers serve is the one
// v1.36 added (issue 11 will find it by discovery instead).
func (s *Suite) StartTraffic(ctx context.Context, t *testing.T, namespace string) *Load {
	t.Helper()
	from, err := rollout.ClusterVersion(ctx, s.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := traffic.Start(ctx, s.Cluster, traffic.Options{
		Namespace:  namespace,
		NewAPIPath: "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("traffic started in %s at %s", namespace, from)
	return &Load{s: s, tr: tr, From: from}
}

// Runner logs a rollout's steps in t and marks the traffic's phases by
// them; also, when set, is told of each step too.
func (l *Load) Runner(t *testing.T, also func(ctx context.Context, step string)) *rollout.Runner {
	return &rollout.Runner{Out: LogWriter(t), OnStep: func(ctx context.Context, step string) {
		if err := l.tr.Phase(ctx, step); err != nil {
			t.Logf("traffic refresh: %v", err)
		}
		if also != nil {
			also(ctx, step)
		}
	}}
}

// Judge stops the traffic, keeps its records as evidence, and judges the
// rollout promises it carries (Suite.Judge).
func (l *Load) Judge(ctx context.Context, t *testing.T) {
	t.Helper()
	sum, err := l.tr.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("traffic during the transitions:\n%s", sum)
	l.s.Measured(t, "traffic: %d requests, %d acknowledged writes lost, %d watch events missed, %d false 404s",
		sum.Requests, len(sum.LostWrites), len(sum.MissedWatchEvents), sum.FalseNotFound)
	l.save(t)
	for _, v := range sum.Verdicts() {
		l.s.Judge(t, v)
	}
}

// Delete removes the traffic's objects; it outlives a cancelled test
// (Ctrl-C), so it uses a context of its own.
func (l *Load) Delete(ctx context.Context) {
	_ = l.tr.Delete(context.WithoutCancel(ctx))
}

func (l *Load) save(t *testing.T) {
	path := filepath.Join(l.s.Artifacts, "traffic", strings.ReplaceAll(t.Name(), "/", "_")+".json")
	n, err := l.tr.WriteRecords(path)
	if err != nil {
		t.Log(err)
		return
	}
	t.Logf("%d request records in %s", n, path)
}
