package proxy

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/skewer-k8s/skewer/harness/certification"
)

// proxyPromises judges the proxy's promises in the window with the very
// checks skewer certify runs (certification.CheckProxy), on the resource
// the window's discovery found only the newer apiservers serve: every
// verb routed through an older apiserver and the watch's events, no false
// forwarding, the loop guard, the rerouted count, the audit trail,
// identity, RBAC at the entry server (forged identity headers too), and
// CRD/APIService groups out of scope.
func proxyPromises(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	for _, v := range certification.CheckProxy(ctx, s.Cluster, win.cert) {
		s.Judge(t, v)
	}
	return ctx
}
