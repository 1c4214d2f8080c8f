package rollout

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
)

// TestBadInput passes rollouts that must be refused to the library the
// CLI calls, against the real cluster, and checks each left the cluster as
// it was (certification.CheckRefusesBadInput).
func TestBadInput(t *testing.T) {
	f := features.New("bad rollout input changes nothing").WithLabel("area", "rollout").
		Assess("each is refused with a clear error", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			s.Judge(t, certification.CheckRefusesBadInput(ctx, s.Cluster, pair(ctx, t)))
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// TestInterrupted stops a rollout in the middle of a node's kubeadm join,
// the way Ctrl-C does, then checks that every control plane can still be
// accounted for and that a rollback recovers from there
// (certification.CheckInterruptedRecovers).
func TestInterrupted(t *testing.T) {
	f := features.New("an interrupted rollout is recovered by a rollback").WithLabel("area", "rollout").WithLabel("disruptive", "true").WithLabel("slow", "true").
		WithLabel(suite.RestartsLabel, restarts.ControlPlane).
		Assess("a cancel during the join leaves every control plane accounted for, and a rollback recovers", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			p := pair(ctx, t)
			before, err := certification.MarkBefore(ctx, s.Cluster, p.From)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			s.Judge(t, certification.CheckInterruptedRecovers(ctx, s.Cluster, p, nil, before, suite.LogWriter(t)))
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// pair is the cluster's version, and --rollout.to.
func pair(ctx context.Context, t *testing.T) promise.Pair {
	from, err := rollout.ClusterVersion(ctx, s.Cluster)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	p, err := promise.ParsePair(from.String(), flagTo.String())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return p
}
