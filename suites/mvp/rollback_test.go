package mvp

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

const gate = "UnknownVersionInteroperabilityProxy"

// stranded is what a client kept of window one, met again after the
// rollback and after the roll-through.
var stranded *certification.Stranded

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
	s.Measured(t, "%s with %s=false and no --peer-ca-file answered the false 404; with the proxy on again it forwards %s %s after its restart", old.Name, gate, newResource, time.Since(start).Round(100*time.Millisecond))
	return ctx
}

// rollBack starts the traffic that runs until the rollout is through and,
// under it, returns every control plane to the older version.
func rollBack(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	if load == nil {
		load = s.StartTraffic(ctx, t, trafficNamespace)
	}
	// What a client keeps of the window, met again after the rollback.
	var err error
	stranded, err = certification.Strand(ctx, s.Cluster, win.cert)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rollout.Rollback(ctx, s.Cluster, rollout.RollbackInput{To: win.From, Runner: load.Runner(t, nil)})).To(Succeed())
	s.Judge(t, certification.CheckMembership(ctx, s.Cluster, "the rollback"))
	s.Judge(t, certification.CheckRollback(ctx, s.Cluster, win.From, before))
	// With no server of the newer version left, the 404 is true and
	// nothing is forwarded.
	s.Judge(t, certification.CheckAllOld(ctx, s.Cluster, win.cert.Resource, before))
	for _, m := range stranded.AfterRollback(ctx, s.Cluster) {
		s.Measured(t, "%s", m)
	}
	win = nil
	return ctx
}

// through carries the surge rollout through to every control plane at the
// newer version, under the traffic.
func through(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	g.Expect(rollout.Roll(ctx, s.Cluster, rollout.RollInput{To: flagTo, Strategy: rollout.StrategySurge, Runner: load.Runner(t, nil)})).To(Succeed())
	s.Judge(t, certification.CheckMembership(ctx, s.Cluster, "the rollout"))
	s.Judge(t, certification.CheckVersions(ctx, s.Cluster, flagTo, before))
	if stranded != nil {
		if m := stranded.AfterThrough(ctx, s.Cluster); m != "" {
			s.Measured(t, "%s", m)
		}
	}
	// Every apiserver serves the new resource itself now: nothing left to
	// forward.
	for _, sv := range servers(ctx, t) {
		local, err := discoveryResources(ctx, sv, true)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(local).To(HaveKey(newGroup+"/"+newVersion+"/"+newResource), "%s serves %s itself", sv.Name, newResource)
	}
	win = nil
	return ctx
}
