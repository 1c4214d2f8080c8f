package mvp

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/rollout"
)

// win is the mixed window the running test holds.
var win *window

// beforeName is a ConfigMap made before the rollout, found intact after
// the rollback.
const beforeName = "mvp-before-rollout"

// TestWindowOne holds one of three control planes at the newer version:
// the older two must forward what only it serves.
func TestWindowOne(t *testing.T) {
	f := features.New("mixed window, one control plane at the newer version").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			markBefore(ctx, t)
			win = holdWindow(ctx, t, 1)
			return ctx
		}).
		Assess("an old apiserver serves the new resource by forwarding, for every verb", routing).
		Assess("the rerouted counter moves by exactly the proxied requests", reroutedExactly).
		Assess("a resource that exists nowhere is 404 everywhere and not forwarded", noFalseForwarding).
		Assess("a request already marked proxied is served locally", loopGuard).
		Assess("the peer sees the original user; forged identity and RBAC denial stop at the entry server", trust).
		Assess("peer-aggregated discovery shows the union; nopeer shows local only", discovery).
		Assess("CRD and aggregated APIService groups are not forwarded and fail fast", scope).
		Assess("an API turned off on one apiserver is served by forwarding (deterministic variant)", runtimeConfigVariant).
		Assess("a black-holed peer link gives an explicit 503 within a bound, never a 404 or a hang", blackHole).
		Assess("a slowed peer link: slower below the timeouts, one write at most between, a 503 above", slowLink).
		Assess("the only capable peer stopped", onlyPeerStopped).
		Feature()
	s.Env.Test(t, f)
}

// TestWindowTwo holds two of three at the newer version: the old one has
// two capable peers.
func TestWindowTwo(t *testing.T) {
	f := features.New("mixed window, two control planes at the newer version").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			win = holdWindow(ctx, t, 2)
			return ctx
		}).
		Assess("an old apiserver forwards to both capable peers", spread).
		Assess("with one capable peer stopped, the other serves", otherPeerServes).
		Feature()
	s.Env.Test(t, f)
}

// TestRollback turns the proxy off on an old apiserver and on again, then
// returns every control plane to the older version.
func TestRollback(t *testing.T) {
	f := features.New("the switch and the rollback").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if win == nil {
				win = holdWindow(ctx, t, 1)
			}
			return ctx
		}).
		Assess("with the gate off the false 404 returns; with it on again, it is gone", gateSwitch).
		Assess("rolling back to all-old leaves every object from before intact", rollBack).
		Feature()
	s.Env.Test(t, f)
}

// markBefore makes the ConfigMap the rollback must find, if the cluster is
// still all at the older version.
func markBefore(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	for _, v := range versions {
		if v != fromVersion(t) {
			return
		}
	}
	cs, err := s.Cluster.Client()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: beforeName}, Data: map[string]string{"made-at": fromVersion(t)}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
}
