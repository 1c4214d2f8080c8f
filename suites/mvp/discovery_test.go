package mvp

import (
	"context"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// peerDiscovery compares each apiserver's peer-merged /apis with the local
// views (profile=nopeer) of all of them.
func peerDiscovery(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	local := map[string]map[string]bool{}
	union := map[string]bool{}
	for _, sv := range win.all() {
		res, err := discoveryResources(ctx, sv, true)
		g.Expect(err).NotTo(HaveOccurred())
		local[sv.Name] = res
		for r := range res {
			union[r] = true
		}
	}
	key := newGroup + "/" + newVersion + "/" + newResource
	for _, sv := range win.all() {
		merged, err := discoveryResources(ctx, sv, false)
		g.Expect(err).NotTo(HaveOccurred())
		var missing, viaPeers []string
		for r := range union {
			if !merged[r] {
				missing = append(missing, r)
			}
		}
		for r := range merged {
			if !local[sv.Name][r] {
				viaPeers = append(viaPeers, r)
			}
		}
		sort.Strings(viaPeers)
		g.Expect(missing).To(BeEmpty(), "%s's /apis lacks what its peers serve", sv.Name)
		g.Expect(merged).To(HaveKey(key), "%s's /apis", sv.Name)
		if sv.Version == win.From {
			g.Expect(local[sv.Name]).NotTo(HaveKey(key), "%s's nopeer view shows only what it serves", sv.Name)
			g.Expect(viaPeers).To(ContainElement(key))
		}
		s.Measured(t, "discovery on %s (%s): %d resources merged, %d local; only through peers: %v", sv.Name, sv.Version, len(merged), len(local[sv.Name]), viaPeers)
	}
	return ctx
}

// scope shows that groups served by a CRD or an aggregated APIService are
// out of the proxy's scope: every apiserver answers for them itself - a
// CRD everywhere, an APIService whose backend is missing with a fast 503.
func scope(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	admin := win.Old[0].client().Discovery().RESTClient()
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.mvp.skewer.io"},
 "spec":{"group":"mvp.skewer.io","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	apiService := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
 "metadata":{"name":"v1.mvp-agg.skewer.io"},
 "spec":{"group":"mvp-agg.skewer.io","version":"v1","groupPriorityMinimum":1000,"versionPriority":15,
  "insecureSkipTLSVerify":true,"service":{"namespace":"skewer-mvp","name":"mvp-nowhere","port":443}}}`
	for path, body := range map[string]string{
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions": crd,
		"/apis/apiregistration.k8s.io/v1/apiservices":             apiService,
	} {
		err := admin.Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
		if !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred(), "create %s", path)
		}
	}
	defer func() {
		// Clean-up outlives a cancelled test (Ctrl-C): a fresh context.
		ctx := context.WithoutCancel(ctx)
		_ = admin.Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.mvp.skewer.io").Do(ctx).Error()
		_ = admin.Delete().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1.mvp-agg.skewer.io").Do(ctx).Error()
	}()
	for _, sv := range win.all() {
		cs, tr := sv.traced()
		rc := cs.Discovery().RESTClient()
		// The CRD's resource, once this server has established it, is its own to serve.
		g.Eventually(func() error {
			return rc.Get().AbsPath("/apis/mvp.skewer.io/v1/namespaces/default/widgets").Do(ctx).Error()
		}).WithTimeout(30*time.Second).Should(Succeed(), "widgets on %s", sv.Name)
		start := time.Now()
		err := rc.Get().AbsPath("/apis/mvp-agg.skewer.io/v1/things").Do(ctx).Error()
		took := time.Since(start)
		var code int32
		if st, ok := err.(apierrors.APIStatus); ok {
			code = st.Status().Code
		}
		g.Expect(code).To(BeEquivalentTo(503), "the APIService without a backend on %s: %v", sv.Name, err)
		g.Expect(took).To(BeNumerically("<", 5*time.Second), "fail fast")
		calls := tr.take()
		// Only the last CRD request (the 2xx) and the APIService one are the evidence.
		calls = calls[len(calls)-2:]
		expectNotForwarded(t, win, sv, calls)
		s.Measured(t, "%s: a CRD's widgets %d, an APIService without a backend %d in %s, neither forwarded", sv.Name, calls[0].Code, calls[1].Code, took.Round(time.Millisecond))
	}
	return ctx
}
