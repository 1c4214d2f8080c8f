package mvp

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
)

const gate = "UnknownVersionInteroperabilityProxy"

// gateSwitch turns the proxy's feature gate off on an old apiserver: the
// false 404 the proxy exists to prevent comes back (the baseline), and
// goes again once the gate is back on.
func gateSwitch(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	old, peer := win.Old[0], win.New[0]
	_, err := peer.client().AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "%s serves %s", peer.Name, newResource)
	// A 1.35 apiserver refuses to start with --peer-ca-file and the gate
	// off ("--peer-ca-file requires UnknownVersionInteroperabilityProxy
	// feature to be turned on"): the switch is both.
	off := &faults.APIServerFlags{Node: old.Node, Set: map[string]string{"feature-gates": gate + "=false"}, Remove: []string{"peer-ca-file"}}
	g.Expect(off.Inject(ctx, s.Cluster)).To(Succeed())
	reverted := false
	defer func() {
		if !reverted {
			_ = off.Revert(context.Background(), s.Cluster)
		}
	}()
	cs, tr := old.traced()
	_, err = cs.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "with %s=false, %s answers the false 404: %v", gate, old.Name, err)
	logCalls(t, "baseline, the gate off on "+old.Name, tr.take())

	g.Expect(off.Revert(ctx, s.Cluster)).To(Succeed())
	reverted = true
	start := time.Now()
	g.Eventually(func() error {
		_, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		return err
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "the gate on again: %s forwards", old.Name)
	s.Report(t, "measured", "%s with %s=false and no --peer-ca-file answered the false 404; with the proxy on again it forwards %s %s after its restart", old.Name, gate, newResource, time.Since(start).Round(100*time.Millisecond))
	return ctx
}

// rollBack returns every control plane to the older version.
func rollBack(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	actions, err := rollout.Surge(ctx, s.Cluster, rollout.SurgeInput{To: win.From, AllowDowngrade: true})
	g.Expect(err).NotTo(HaveOccurred())
	r := &rollout.Runner{Out: suite.LogWriter(t)}
	g.Expect(r.Run(ctx, s.Cluster, actions)).To(Succeed())
	g.Expect(rollout.CheckMembership(ctx, s.Cluster)).To(Succeed())
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	for n, v := range versions {
		g.Expect(v).To(Equal(win.From), "%s", n)
	}
	cs, err := s.Cluster.Client()
	g.Expect(err).NotTo(HaveOccurred())
	cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, beforeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		t.Logf("no %s: the suite began on a cluster already in the mixed window", beforeName)
	} else {
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cm.Data).To(HaveKeyWithValue("made-at", win.From))
	}
	// With no server of the newer version left, the 404 is true and
	// nothing is forwarded.
	for _, sv := range servers(ctx, t) {
		before := sv.scrape(ctx, t)
		_, err := sv.client().AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", sv.Name, err)
		g.Expect(metrics.Delta(before, sv.scrape(ctx, t), rerouted, map[string]string{"code": "404"})).To(BeZero())
	}
	win = nil
	return ctx
}
