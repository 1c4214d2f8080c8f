package rollout

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
)

// TestInPlace upgrades the same nodes with kubeadm (the kinder way), then
// rolls back from the finished upgrade by surge, leaving the cluster where
// TestSurge expects it.
func TestInPlace(t *testing.T) {
	var from string
	f := features.New("in-place rollout under traffic").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ctx, from = beginTraffic(ctx, t, "skewer-traffic-inplace")
			return ctx
		}).
		Assess("kubeadm upgrades every control plane in place", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			v, err := nodeimage.ParseVersion(*flagTo)
			g.Expect(err).NotTo(HaveOccurred())
			art, err := (&nodeimage.Builder{Out: suite.LogWriter(t)}).Artifacts(ctx, v)
			g.Expect(err).NotTo(HaveOccurred())
			nodesBefore, err := s.Cluster.ControlPlanes(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			actions, err := rollout.InPlace(ctx, s.Cluster, rollout.InPlaceInput{To: *flagTo, Artifacts: art})
			g.Expect(err).NotTo(HaveOccurred())
			run(ctx, t, actions)
			expectVersions(ctx, t, map[string]int{*flagTo: 3})
			nodesAfter, err := s.Cluster.ControlPlanes(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(nodesAfter)).To(Equal(names(nodesBefore)), "in place: the same nodes")
			return ctx
		}).
		Assess("a rollback from the finished upgrade returns every control plane to the old version", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			surge(ctx, t, rollout.SurgeInput{To: from, AllowDowngrade: true})
			expectVersions(ctx, t, map[string]int{from: 3})
			return ctx
		}).
		// A v1.35.4 apiserver answers a false 404 or two among ~6700 requests
		// while a peer goes 1.35 -> 1.36 in place (docs/status.md): reported here,
		// each with its evidence, and left to the Mixed Version Proxy suite.
		Assess("no acknowledged write was lost and no watch event missed; false 404s are reported", trafficClean(true)).
		Teardown(deleteTraffic).
		Feature()
	s.Env.Test(t, f)
}
