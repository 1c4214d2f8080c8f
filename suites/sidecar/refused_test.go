package sidecar

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// TestRolloutRefused: this suite's cluster has one control plane, so it is
// where a rollout must refuse a cluster that is not HA, changing
// nothing.
func TestRolloutRefused(t *testing.T) {
	f := features.New("rollout on a single control plane").WithLabel("area", "sidecar").
		Assess("a rollout refuses a cluster that is not HA and changes nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			filter := "label=io.x-k8s.kind.cluster=" + s.Cluster.Name
			before, err := docker.Containers(ctx, filter)
			g.Expect(err).NotTo(HaveOccurred())
			versions, err := rollout.NodeVersions(ctx, s.Cluster)
			g.Expect(err).NotTo(HaveOccurred())
			err = rollout.Roll(ctx, s.Cluster, rollout.RollInput{To: version.MustParse("v1.36.3"), Strategy: rollout.StrategySurge,
				Images: &nodeimage.Resolver{Source: nodeimage.SourceLocal}})
			t.Log(err)
			g.Expect(err).To(MatchError(ContainSubstring("needs an HA control plane")))
			after, err := docker.Containers(ctx, filter)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(after).To(Equal(before))
			again, err := rollout.NodeVersions(ctx, s.Cluster)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(versions))
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}
