package proxy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// stranded is what a client kept of window one, met again after the
// rollback and after the roll-through.
var stranded *certification.Stranded

// routed is the resource window one routed, which every apiserver serves
// itself once the rollout is through.
var routed discovery.Resource

// gateSwitch turns the proxy off on an old apiserver, then on again
// (certification.CheckGateSwitch).
func gateSwitch(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	for _, v := range certification.CheckGateSwitch(ctx, s.Cluster, win.cert) {
		s.Judge(t, v)
	}
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
	routed = win.cert.Resource
	s.Judge(t, certification.CheckAllOld(ctx, s.Cluster, routed, before))
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
	// Every apiserver serves the window's resource itself now: nothing
	// left to forward.
	for _, sv := range servers(ctx, t) {
		local, err := discoveryResources(ctx, sv, true)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(local).To(HaveKey(routed.Key()), "%s serves %s itself", sv.Name, routed.Key())
	}
	win = nil
	return ctx
}
