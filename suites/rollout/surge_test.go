package rollout

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

type ctxKey string

const trafficKey ctxKey = "traffic"

func TestSurge(t *testing.T) {
	var from string
	var before *corev1.ConfigMap
	f := features.New("surge rollout under traffic").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ctx, from = beginTraffic(ctx, t, "skewer-traffic")
			g := NewWithT(t)
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			// An object from before the rollout, to find intact at the end.
			before, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "before-rollout"}, Data: map[string]string{"from": from}}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return ctx
		}).
		Assess("replacing one control plane holds the cluster in the mixed window", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			surge(ctx, t, rollout.SurgeInput{To: *flagTo, PauseAfter: 1})
			expectVersions(ctx, t, map[string]int{from: 2, *flagTo: 1})
			return ctx
		}).
		Assess("a rollback from the mixed window returns every control plane to the old version", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			surge(ctx, t, rollout.SurgeInput{To: from, AllowDowngrade: true})
			expectVersions(ctx, t, map[string]int{from: 3})
			return ctx
		}).
		Assess("the full rollout replaces every control plane", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			surge(ctx, t, rollout.SurgeInput{To: *flagTo})
			expectVersions(ctx, t, map[string]int{*flagTo: 3})
			return ctx
		}).
		Assess("no acknowledged write was lost, no watch event missed, no false 404", trafficClean(false)).
		Assess("objects from before the rollout are intact", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, before.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Data).To(Equal(before.Data))
			g.Expect(got.UID).To(Equal(before.UID))
			return ctx
		}).
		Teardown(deleteTraffic).
		Feature()
	s.Env.Test(t, f)
}

// beginTraffic starts the traffic in namespace and returns the context
// carrying it, and the cluster's version before the transition.
func beginTraffic(ctx context.Context, t *testing.T, namespace string) (context.Context, string) {
	g := NewWithT(t)
	from, err := s.Cluster.KubernetesVersion(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := traffic.Start(ctx, s.Cluster, traffic.Options{
		Namespace:   namespace,
		NewAPIPath:  "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies",
		NewAPISince: "v1.36.0",
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%s -> %s under traffic", from, *flagTo)
	return context.WithValue(ctx, trafficKey, tr), from
}

// surge plans and runs a surge.
func surge(ctx context.Context, t *testing.T, in rollout.SurgeInput) {
	actions, err := rollout.Surge(ctx, s.Cluster, in)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	run(ctx, t, actions)
}

// run runs actions, marking the traffic's phases by step, and checks the
// cluster's membership after them.
func run(ctx context.Context, t *testing.T, actions []rollout.Action) {
	g := NewWithT(t)
	tr := ctx.Value(trafficKey).(*traffic.Traffic)
	r := &rollout.Runner{Out: suite.LogWriter(t), OnStep: func(ctx context.Context, name string) {
		if err := tr.Phase(ctx, name); err != nil {
			t.Logf("traffic refresh: %v", err)
		}
	}}
	g.Expect(r.Run(ctx, s.Cluster, actions)).To(Succeed())
	g.Expect(rollout.CheckMembership(ctx, s.Cluster)).To(Succeed())
}

// trafficClean stops the traffic and accounts for it: nothing lost, and no
// false 404 unless falseNotFoundReported, where each is logged as a finding.
func trafficClean(falseNotFoundReported bool) func(context.Context, *testing.T, *envconf.Config) context.Context {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		g := NewWithT(t)
		tr := ctx.Value(trafficKey).(*traffic.Traffic)
		sum, err := tr.Stop(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("traffic during the transitions:\n%s", sum)
		s.Report(t, "measured", "traffic: %d requests, %d acknowledged writes lost, %d watch events missed, %d false 404s",
			sum.Requests, len(sum.LostWrites), len(sum.MissedWatchEvents), sum.FalseNotFound)
		saveRecords(t, tr.Records())
		g.Expect(sum.Requests).To(BeNumerically(">", 100), "traffic ran")
		g.Expect(sum.LostWrites).To(BeEmpty(), "acknowledged writes missing from a final list")
		g.Expect(sum.MissedWatchEvents).To(BeEmpty(), "acknowledged writes the watch never delivered")
		for _, r := range sum.FalseNotFoundRecords {
			s.Report(t, "finding", "false 404: %s %s %s (server %s) in phase %q", r.Time.Format(time.RFC3339Nano), r.Target, r.Object, r.Server, r.Phase)
		}
		if !falseNotFoundReported {
			g.Expect(sum.FalseNotFound).To(BeZero(), "404s for mutatingadmissionpolicies while an apiserver served them")
		}
		return ctx
	}
}

func deleteTraffic(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	if tr, ok := ctx.Value(trafficKey).(*traffic.Traffic); ok {
		_ = tr.Delete(ctx)
	}
	return ctx
}

func names(nodes []cluster.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// expectVersions checks how many control planes run each version, asking
// each apiserver itself.
func expectVersions(ctx context.Context, t *testing.T, want map[string]int) {
	g := NewWithT(t)
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	got := map[string]int{}
	for _, v := range versions {
		got[v]++
	}
	g.Expect(got).To(Equal(want), "control planes by version: %v", versions)
}

func saveRecords(t *testing.T, records []traffic.Record) {
	dir := filepath.Join(s.Artifacts, "traffic")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	b, _ := json.Marshal(records)
	path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Log(err)
		return
	}
	t.Logf("%d request records in %s", len(records), path)
}
