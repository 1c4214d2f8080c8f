package sidecar

import (
	"bytes"
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/internal/cli"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// TestRolloutRefused: this suite's cluster has one control plane, so it is
// where `skewer rollout` must refuse a cluster that is not HA, changing
// nothing.
func TestRolloutRefused(t *testing.T) {
	f := features.New("rollout on a single control plane").
		Assess("skewer rollout refuses a cluster that is not HA and changes nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			filter := "label=io.x-k8s.kind.cluster=" + s.Cluster.Name
			before, err := docker.Containers(ctx, filter)
			g.Expect(err).NotTo(HaveOccurred())
			versions, err := rollout.NodeVersions(ctx, s.Cluster)
			g.Expect(err).NotTo(HaveOccurred())
			var stderr bytes.Buffer
			code := cli.Run(ctx, []string{"rollout", "--name", s.Cluster.Name, "--to", "v1.36.3", "--image-source", "local"}, &bytes.Buffer{}, &stderr)
			t.Log(stderr.String())
			g.Expect(code).NotTo(BeZero())
			g.Expect(stderr.String()).To(ContainSubstring("needs an HA control plane"))
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
