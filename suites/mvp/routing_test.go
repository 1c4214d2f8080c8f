package mvp

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/skewer-k8s/skewer/harness/certification"
)

const admin = "kubernetes-admin"

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

// spread sends lists of the new resource through the old apiserver and
// finds both capable peers among those that served them.
func spread(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	old := win.Old[0]
	cs, tr := old.traced()
	for range 20 {
		_, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	c := expectProxiedAudit(t, old, win.New, tr.take(), admin)
	for _, p := range win.New {
		g.Expect(c.byPeer[p.Name]).To(BeNumerically(">", 0), "%s served none of 20 (%v)", p.Name, c.byPeer)
	}
	return ctx
}
