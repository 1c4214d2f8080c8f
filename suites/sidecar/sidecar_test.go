package sidecar

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecarchecks"
	"github.com/skewer-k8s/skewer/harness/suite"
)

var (
	once     sync.Once
	sidecars *sidecarchecks.Sidecars
	setupErr error
)

// checks builds the fixture image (cached by its sources), loads it into
// every node and finds a node per kubelet version, once per run.
func checks(ctx context.Context, t *testing.T) *sidecarchecks.Sidecars {
	t.Helper()
	once.Do(func() {
		start := time.Now()
		image, err := (&nodeimage.Builder{Out: suite.LogWriter(t)}).FixtureImage(ctx)
		if err == nil {
			err = s.Cluster.LoadImages(ctx, image)
		}
		if err == nil {
			sidecars, err = sidecarchecks.New(ctx, s.Cluster, image)
		}
		setupErr = err
		t.Logf("fixture image %s built and loaded in %s", image, time.Since(start).Round(100*time.Millisecond))
	})
	NewWithT(t).Expect(setupErr).NotTo(HaveOccurred())
	return sidecars
}

// judged is an assessment that judges what check returns.
func judged(check func(*sidecarchecks.Sidecars, context.Context) []promise.Verdict) features.Func {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		for _, v := range check(checks(ctx, t), ctx) {
			s.Judge(t, v)
		}
		return ctx
	}
}

// one adapts a check of one promise.
func one(check func(*sidecarchecks.Sidecars, context.Context) promise.Verdict) func(*sidecarchecks.Sidecars, context.Context) []promise.Verdict {
	return func(sc *sidecarchecks.Sidecars, ctx context.Context) []promise.Verdict {
		return []promise.Verdict{check(sc, ctx)}
	}
}

// TestKubelets: what a kubelet does with native sidecars, on every kubelet
// version of the cluster: start order, a crash restarted alone, the
// termination order and flush, a sidecar that ignores SIGTERM, a Job that
// completes.
func TestKubelets(t *testing.T) {
	f := features.New("native sidecars on every kubelet").WithLabel("area", "sidecar").
		// The fixture's sidecar "proxy" crashes on purpose.
		WithLabel(suite.RestartsLabel, sidecarchecks.CrashingSidecar).
		Assess("a Job with a native sidecar completes; with a regular helper it never does", judged(one((*sidecarchecks.Sidecars).CheckJobs))).
		Assess("a Job whose sidecar keeps crashing ends on its app's result, the restarts reported apart", judged(one((*sidecarchecks.Sidecars).CheckJobSidecarCrashes))).
		Assess("the kubelet's Pod cgroup and the QoS class follow the sidecar formula for limits", judged(one((*sidecarchecks.Sidecars).CheckLimits))).
		Assess("the app starts after the sidecar has started, or is ready when a startup probe gates it", judged(one((*sidecarchecks.Sidecars).CheckStartOrder))).
		Assess("a sidecar that crashes is restarted alone", judged(one((*sidecarchecks.Sidecars).CheckCrashAlone))).
		Assess("the app stops first, then the sidecars in reverse order; a flush cut short counts its lost lines", judged((*sidecarchecks.Sidecars).CheckTermination)).
		Assess("a sidecar that ignores SIGTERM holds its Pod for the grace period and no longer", judged(one((*sidecarchecks.Sidecars).CheckSIGTERMIgnored))).
		Feature()
	s.Env.Test(t, f)
}

// TestAdmission: what the API server does with them: readiness gating a
// rollout, the quota's formula, a webhook that strips restartPolicy.
func TestAdmission(t *testing.T) {
	f := features.New("native sidecars through the API").WithLabel("area", "sidecar").
		Assess("a sidecar that never turns ready keeps its Pod out of the Service and halts the rollout", judged(one((*sidecarchecks.Sidecars).CheckReadinessGates))).
		Assess("ResourceQuota charges the sidecar formula, and a quota between the two admits the legacy Pod only", judged((*sidecarchecks.Sidecars).CheckResources)).
		Assess("a webhook that strips restartPolicy: seen by a dry run before anything rolls out; both ways it fails shown", judged((*sidecarchecks.Sidecars).CheckStripped)).
		Feature()
	s.Env.Test(t, f)
}

// TestMigration moves a helper to a native sidecar namespace by namespace,
// in batches with stop conditions: a batch that breaches one stops the
// expansion, and a rollback returns every migrated Deployment to its
// legacy template. Each batch is checked before (dry runs) and after (the
// Pods admitted); a program built against an old k8s.io/api that writes a
// migrated Deployment back is caught by the same checks.
func TestMigration(t *testing.T) {
	f := features.New("migration in batches").WithLabel("area", "sidecar").
		WithLabel(suite.RestartsLabel, sidecarchecks.CrashingSidecar).
		Assess("a breach stops the expansion; the rollback restores the legacy templates", judged((*sidecarchecks.Sidecars).CheckMigration)).
		Assess("each stop condition, breached, stops the expansion and names what it saw", judged(one((*sidecarchecks.Sidecars).CheckStopConditions))).
		Assess("an old client's read-modify-write drops restartPolicy; the migration's checks name it", judged(one((*sidecarchecks.Sidecars).CheckOldClient))).
		Feature()
	s.Env.Test(t, f)
}

// TestWorkerReplaced replaces the older worker, under a Deployment's Pod
// with native sidecars and a migration batch in flight, by a worker of the
// newer kubelet, as a node pool upgrade does: last, since it changes the
// cluster's nodes.
func TestWorkerReplaced(t *testing.T) {
	f := features.New("a worker replaced under sidecar Pods").WithLabel("area", "sidecar").
		Assess("the evicted Pods stop in reverse order and lose no line; the batch accounts for them and starts again in order on the newer worker",
			judged((*sidecarchecks.Sidecars).CheckWorkerReplaced)).
		Feature()
	s.Env.Test(t, f)
}
