package mvp

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/skewer-k8s/skewer/harness/metrics"
)

const admin = "kubernetes-admin"

// routing drives every verb on the new resource through an old apiserver
// alone, reads across servers both ways, and accounts for each request in
// both servers' audit logs.
func routing(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	old, peer := win.Old[0], win.New[0]
	run := runID()
	cs, tr := old.traced()
	api := cs.AdmissionregistrationV1().MutatingAdmissionPolicies()
	peerAPI := peer.client().AdmissionregistrationV1().MutatingAdmissionPolicies()
	selector := metav1.ListOptions{LabelSelector: suiteLabel + "=" + run}

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := api.Watch(wctx, selector)
	g.Expect(err).NotTo(HaveOccurred(), "watch through %s", old.Name)
	events := collect(w)

	made, err := api.Create(ctx, newPolicy(run), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "create through %s", old.Name)
	got, err := api.Get(ctx, made.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "get through %s", old.Name)
	list, err := api.List(ctx, selector)
	g.Expect(err).NotTo(HaveOccurred(), "list through %s", old.Name)
	g.Expect(list.Items).To(HaveLen(1))
	got.Labels["skewer.io/updated"] = "true"
	_, err = api.Update(ctx, got, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "update through %s", old.Name)
	_, err = api.Patch(ctx, made.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"skewer.io/patched":"true"}}}`), metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "patch through %s", old.Name)

	// Across servers, both ways.
	seen, err := peerAPI.Get(ctx, made.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "%s reads what %s made", peer.Name, old.Name)
	g.Expect(seen.UID).To(Equal(made.UID))
	g.Expect(seen.Labels).To(HaveKeyWithValue("skewer.io/updated", "true"))
	g.Expect(seen.Annotations).To(HaveKeyWithValue("skewer.io/patched", "true"))
	other, err := peerAPI.Create(ctx, newPolicy(run), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	back, err := api.Get(ctx, other.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred(), "%s reads what %s made", old.Name, peer.Name)
	g.Expect(back.UID).To(Equal(other.UID))

	g.Expect(api.Delete(ctx, made.Name, metav1.DeleteOptions{})).To(Succeed(), "delete through %s", old.Name)
	g.Expect(api.Delete(ctx, other.Name, metav1.DeleteOptions{})).To(Succeed(), "delete through %s", old.Name)

	want := []string{"ADDED " + made.Name, "MODIFIED " + made.Name, "ADDED " + other.Name, "DELETED " + made.Name, "DELETED " + other.Name}
	g.Eventually(events.seen).WithTimeout(20*time.Second).Should(ContainElements(want), "events of the watch through %s", old.Name)
	t.Logf("the watch through %s delivered: %v", old.Name, events.seen())
	stopWatch()

	calls := tr.take()
	logCalls(t, "requests through "+old.Name+" ("+old.Version.String()+")", calls)
	for _, c := range calls {
		g.Expect(c.Code).To(BeNumerically("<", 300), "%s", c)
	}
	expectProxiedAudit(t, old, win.New, calls, admin)
	return ctx
}

// reroutedExactly sends requests through an old apiserver that the peer
// answers with codes nothing else in the cluster provokes - 404 for names
// that do not exist, 422 for objects it rejects - and checks that the
// rerouted counter moved by exactly their number, per code.
func reroutedExactly(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	old := win.Old[0]
	run := runID()
	cs, tr := old.traced()
	api := cs.AdmissionregistrationV1().MutatingAdmissionPolicies()
	const missing, invalid = 5, 3
	before := old.scrape(ctx, t)
	for i := range missing {
		_, err := api.Get(ctx, fmt.Sprintf("mvp-missing-%s-%d", run, i), metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "get of a name that does not exist: %v", err)
	}
	for range invalid {
		bad := newPolicy(run)
		bad.Spec.Mutations = nil
		_, err := api.Create(ctx, bad, metav1.CreateOptions{})
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "create of a policy without mutations: %v", err)
	}
	after := old.scrape(ctx, t)
	calls := tr.take()
	for code, n := range map[string]int{"404": missing, "422": invalid} {
		d := metrics.Delta(before, after, rerouted, map[string]string{"code": code})
		s.Measured(t, "%s on %s: code=%s moved by %g for %d requests", rerouted, old.Name, code, d, n)
		g.Expect(d).To(BeEquivalentTo(n), "%s{code=%q} on %s", rerouted, code, old.Name)
	}
	t.Logf("%s on %s after: %v", rerouted, old.Name, after.Series(rerouted))
	expectProxiedAudit(t, old, win.New, calls, admin)
	return ctx
}

// noFalseForwarding asks every apiserver for resources no server has.
func noFalseForwarding(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	for _, sv := range win.all() {
		cs, tr := sv.traced()
		before := sv.scrape(ctx, t)
		for _, path := range []string{"/apis/nothing.skewer.io/v1/things", "/apis/" + newGroup + "/v1/nothings", "/apis/" + newGroup + "/v9/" + newResource} {
			err := cs.Discovery().RESTClient().Get().AbsPath(path).Do(ctx).Error()
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s on %s: %v", path, sv.Name, err)
		}
		after := sv.scrape(ctx, t)
		g.Expect(metrics.Delta(before, after, rerouted, map[string]string{"code": "404"})).To(BeZero(), "%s{code=404} on %s", rerouted, sv.Name)
		expectNotForwarded(t, win, sv, tr.take())
	}
	return ctx
}

// loopGuard sends the new resource to an old apiserver already marked as
// proxied: it must answer from itself (404), not forward again.
func loopGuard(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	old := win.Old[0]
	cs, tr := old.traced()
	before := old.scrape(ctx, t)
	res := cs.Discovery().RESTClient().Get().AbsPath(newPath).SetHeader("X-Kubernetes-Peer-Proxied", "true").Do(ctx)
	g.Expect(apierrors.IsNotFound(res.Error())).To(BeTrue(), "a marked request is served locally by %s (%s): %v", old.Name, old.Version, res.Error())
	after := old.scrape(ctx, t)
	g.Expect(metrics.Delta(before, after, rerouted, map[string]string{"code": "404"})).To(BeZero())
	expectNotForwarded(t, win, old, tr.take())
	// The same request unmarked is forwarded: the guard, not the resource, made the 404.
	unmarked := cs.Discovery().RESTClient().Get().AbsPath(newPath).Do(ctx)
	g.Expect(unmarked.Error()).NotTo(HaveOccurred())
	expectProxiedAudit(t, old, win.New, tr.take(), admin)
	return ctx
}

// trust checks who the peer believes is asking.
func trust(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	old := win.Old[0]
	adminCS := old.client()
	const ns = "skewer-mvp"
	_, err := adminCS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	reader := serviceAccount(ctx, t, adminCS, ns, "mvp-reader")
	nobody := serviceAccount(ctx, t, adminCS, ns, "mvp-nobody")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "skewer-mvp-reader"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{newGroup}, Resources: []string{newResource}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "skewer-mvp-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "mvp-reader"}}}
	for _, create := range []func() error{
		func() error {
			_, err := adminCS.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := adminCS.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred())
		}
	}
	readerUser := "system:serviceaccount:" + ns + ":mvp-reader"
	nobodyUser := "system:serviceaccount:" + ns + ":mvp-nobody"

	// The reader's identity reaches the peer (RBAC may take a moment to reach every server).
	readerCS, tr := clientAs(withToken(old.cfg, reader))
	g.Eventually(func() error {
		_, err := readerCS.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
	ok := tr.take()
	expectProxiedAudit(t, old, win.New, ok[len(ok)-1:], readerUser)

	// A user without RBAC for the resource is denied at the entry server.
	nobodyCS, tr := clientAs(withToken(old.cfg, nobody))
	before := old.scrape(ctx, t)
	_, err = nobodyCS.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s lists %s: %v", nobodyUser, newResource, err)
	// The same user forging the front proxy's identity headers is still itself.
	res := nobodyCS.Discovery().RESTClient().Get().AbsPath(newPath).
		SetHeader("X-Remote-User", admin).SetHeader("X-Remote-Group", "system:masters").Do(ctx)
	g.Expect(apierrors.IsForbidden(res.Error())).To(BeTrue(), "forged X-Remote-User: %v", res.Error())
	after := old.scrape(ctx, t)
	g.Expect(metrics.Delta(before, after, rerouted, map[string]string{"code": "403"})).To(BeZero(), "%s{code=403} on %s", rerouted, old.Name)
	denied := tr.take()
	expectNotForwarded(t, win, old, denied)
	for id, evs := range completed(t, old.Name, idSet(denied)) {
		g.Expect(evs[0].User.Username).To(Equal(nobodyUser), "the user %s logged for audit ID %s", old.Name, id)
	}
	return ctx
}

// serviceAccount makes a ServiceAccount and returns a token for it.
func serviceAccount(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) string {
	g := NewWithT(t)
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tok.Status.Token
}

// withToken is cfg's server and CA with a bearer token instead of the
// admin's client certificate.
func withToken(cfg *rest.Config, token string) *rest.Config {
	out := rest.AnonymousClientConfig(cfg)
	out.BearerToken = token
	return out
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

// events keeps what a watch delivers, as "TYPE name".
type events struct {
	ch   chan string
	list []string
}

func collect(w watch.Interface) *events {
	e := &events{ch: make(chan string, 100)}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*admissionv1.MutatingAdmissionPolicy); ok {
				e.ch <- string(ev.Type) + " " + p.Name
			}
		}
		close(e.ch)
	}()
	return e
}

func (e *events) seen() []string {
	for {
		select {
		case s, ok := <-e.ch:
			if !ok {
				return e.list
			}
			e.list = append(e.list, s)
		default:
			return e.list
		}
	}
}
