package rollout

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
)

// TestInPlace upgrades every control plane where it stands with kubeadm,
// under traffic, and checks the same nodes come out at the new version
// with nothing from before lost (certify's in-place run judges the same).
func TestInPlace(t *testing.T) {
	var load *suite.Load
	var before *corev1.ConfigMap
	f := features.New("in-place rollout under traffic").WithLabel("area", "rollout").WithLabel("disruptive", "true").WithLabel("slow", "true").
		WithLabel(suite.RestartsLabel, restarts.ControlPlane).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			load = s.StartTraffic(ctx, t, "skewer-traffic-inplace")
			var err error
			before, err = certification.MarkBefore(ctx, s.Cluster, load.From)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			return ctx
		}).
		Assess("kubeadm upgrades every control plane in place", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			nodesBefore, err := s.Cluster.ControlPlanes(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rollout.Roll(ctx, s.Cluster, rollout.RollInput{To: flagTo, Strategy: rollout.StrategyInPlace, Runner: load.Runner(t, nil)})).To(Succeed())
			s.Judge(t, certification.CheckMembership(ctx, s.Cluster, "the in-place rollout"))
			s.Judge(t, certification.CheckVersions(ctx, s.Cluster, flagTo, before))
			nodesAfter, err := s.Cluster.ControlPlanes(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(nodesAfter)).To(Equal(names(nodesBefore)), "in place: the same nodes")
			return ctx
		}).
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
			}
			return ctx
		}).
		Feature()
	s.Env.Test(t, f)
}

func names(nodes []cluster.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}
