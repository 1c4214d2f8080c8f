package proxy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
)

// win is the mixed window the running test holds.
var win *window

// load is the traffic that runs from the rollback until the rollout is
// through (TestRollback to TestThrough).
var load *suite.Load

const trafficNamespace = "skewer-traffic"

// before is a ConfigMap made before the rollout, found intact after the
// rollback and after the roll-through; nil when the suite began mid-window.
var before *corev1.ConfigMap

// TestWindowOne holds one of three control planes at the newer version:
// the older two must forward what only it serves.
func TestWindowOne(t *testing.T) {
	f := features.New("mixed window, one control plane at the newer version").WithLabel("area", "proxy").WithLabel("disruptive", "true").WithLabel("slow", "true").
		WithLabel(suite.RestartsLabel, restarts.ControlPlane).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			markBefore(ctx, t)
			win = holdWindow(ctx, t, 1)
			return ctx
		}).
		Assess("the proxy's promises, judged by certify's own checks: routing of every verb, no false forwarding, the loop guard, the rerouted count, audit, identity and RBAC, scope", proxyPromises).
		Assess("peer-aggregated discovery shows the union; nopeer shows local only", peerDiscovery).
		Assess("an identity Lease forged to point elsewhere receives nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Judge(t, certification.CheckForgedLease(ctx, s.Cluster, win.cert))
			return ctx
		}).
		Assess("an API turned off on one apiserver is served by forwarding (deterministic variant)", runtimeConfigVariant).
		Assess("a black-holed peer link: an explicit 503 within a bound, never a 404 or a hang; slowed: slower below the timeouts, one write at most between, a 503 above", peerLink).
		Assess("the only capable peer stopped", onlyPeerStopped).
		Assess("the only capable peer serving a certificate the peer CA did not sign receives nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Judge(t, certification.CheckUntrustedPeer(ctx, s.Cluster, win.cert))
			return ctx
		}).
		Assess("the only capable peer killed (SIGKILL, its Lease left behind): explicit 503s within a bound", peerKilled).
		Feature()
	s.Env.Test(t, f)
}

// TestRollback turns the proxy off on an old apiserver and on again, then,
// under traffic that runs until the rollout is through, returns every
// control plane to the older version.
func TestRollback(t *testing.T) {
	f := features.New("the switch and the rollback").WithLabel("area", "proxy").WithLabel("disruptive", "true").WithLabel("slow", "true").
		WithLabel(suite.RestartsLabel, restarts.ControlPlane).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if win == nil {
				win = holdWindow(ctx, t, 1)
			}
			return ctx
		}).
		Assess("with the gate off the false 404 returns; with it on again, it is gone", gateSwitch).
		Assess("rolling back to all-old under traffic leaves every object from before intact", rollBack).
		Feature()
	s.Env.Test(t, f)
}

// TestWindowTwo goes forward again, two of three at the newer version: the
// old one has two capable peers.
func TestWindowTwo(t *testing.T) {
	f := features.New("mixed window, two control planes at the newer version").WithLabel("area", "proxy").WithLabel("disruptive", "true").WithLabel("slow", "true").
		WithLabel(suite.RestartsLabel, restarts.ControlPlane).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			win = holdWindow(ctx, t, 2)
			return ctx
		}).
		Assess("an old apiserver forwards to both capable peers; with one stopped, the other serves", otherPeerServes).
		Assess("with one capable peer killed, the other serves once the dead one's address expires", peerKilled).
		Feature()
	s.Env.Test(t, f)
}

// TestThrough carries the surge rollout through: every control plane at
// the newer version, and the traffic that ran since the rollback judged.
func TestThrough(t *testing.T) {
	f := features.New("the surge rollout carried through under traffic").WithLabel("area", "rollout").WithLabel("disruptive", "true").WithLabel("slow", "true").
		WithLabel(suite.RestartsLabel, restarts.ControlPlane).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if load == nil {
				load = s.StartTraffic(ctx, t, trafficNamespace)
			}
			return ctx
		}).
		Assess("the surge rollout replaces every control plane", through).
		Assess("no acknowledged write was lost, no watch event missed, no false 404", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			load.Judge(ctx, t)
			return ctx
		}).
		Assess("every request forwarded in the run ended at both sides, or its server went down with it", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Judge(t, certification.RunAudit(s.Cluster))
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if load != nil {
				load.Delete(ctx)
				load = nil
			}
			return ctx
		}).
		Feature()
	s.Env.Test(t, f)
}

// markBefore makes the ConfigMap the rollback and the roll-through must
// find intact, if the cluster is still all at the older version.
func markBefore(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	for _, v := range versions {
		if v != fromVersion(t) {
			t.Logf("the suite began on a cluster already in the mixed window: no object from before to find")
			return
		}
	}
	before, err = certification.MarkBefore(ctx, s.Cluster, fromVersion(t))
	g.Expect(err).NotTo(HaveOccurred())
}
