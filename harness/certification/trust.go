package certification

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// auditIDs keeps the Audit-Id of every response a client got.
type auditIDs struct {
	mu  sync.Mutex
	ids []string
}

func (a *auditIDs) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			a.mu.Lock()
			a.ids = append(a.ids, resp.Header.Get("Audit-Id"))
			a.mu.Unlock()
		}
		return resp, err
	})
}

// last is the Audit-Id of the latest response.
func (a *auditIDs) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ids) == 0 {
		return ""
	}
	return a.ids[len(a.ids)-1]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// trustNamespace holds the service accounts the trust checks act as.
const trustNamespace = "skewer-certify-trust"

// asServiceAccount is a client of s acting as a new service account of
// trustNamespace, and its user name.
func asServiceAccount(ctx context.Context, admin kubernetes.Interface, s Server, name string) (*kubernetes.Clientset, *auditIDs, string, error) {
	_, err := admin.CoreV1().ServiceAccounts(trustNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, "", err
	}
	tok, err := admin.CoreV1().ServiceAccounts(trustNamespace).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, "", err
	}
	cfg := rest.AnonymousClientConfig(s.Config)
	cfg.BearerToken = tok.Status.Token
	ids := &auditIDs{}
	cfg.Wrap(ids.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, ids, "system:serviceaccount:" + trustNamespace + ":" + name, err
}

// completedAt is the final audit event of id in node's audit log, if any.
func completedAt(c *cluster.Cluster, node, id string) (*audit.Event, error) {
	evs, err := audit.Read(audit.LogPath(c, node), func(e *audit.Event) bool {
		return string(e.AuditID) == id && (e.Stage == "ResponseComplete" || e.Stage == "Panic")
	})
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	return &evs[len(evs)-1], nil
}

// CheckTrust judges mvp.trust.identity and mvp.trust.rbac-at-entry: a
// service account allowed to list the window's resource lists it through
// an older apiserver, and the newer peer's audit log records the request
// under the same audit ID as that service account, not as the entry
// server; one without that permission is answered 403 by the entry
// server, and no peer logs the request at all.
func CheckTrust(ctx context.Context, c *cluster.Cluster, w *Window) []certify.Verdict {
	const identity, rbac = "mvp.trust.identity", "mvp.trust.rbac-at-entry"
	both := func(format string, args ...any) []certify.Verdict {
		return []certify.Verdict{fail(identity, format, args...), fail(rbac, format, args...)}
	}
	old := w.Old[0]
	admin, err := old.client()
	if err != nil {
		return both("%v", err)
	}
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trustNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return both("%v", err)
	}
	defer admin.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), trustNamespace, metav1.DeleteOptions{})
	r := w.Resource
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "skewer-certify-reader"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "skewer-certify-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: trustNamespace, Name: "reader"}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return both("%v", err)
	}
	defer admin.RbacV1().ClusterRoles().Delete(context.WithoutCancel(ctx), role.Name, metav1.DeleteOptions{})
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return both("%v", err)
	}
	defer admin.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), binding.Name, metav1.DeleteOptions{})
	reader, readerIDs, readerUser, err := asServiceAccount(ctx, admin, old, "reader")
	if err != nil {
		return both("%v", err)
	}
	nobody, nobodyIDs, nobodyUser, err := asServiceAccount(ctx, admin, old, "nobody")
	if err != nil {
		return both("%v", err)
	}
	path := r.Path()
	if r.Namespaced {
		path = "/apis/" + r.Group + "/" + r.Version + "/namespaces/" + trustNamespace + "/" + r.Resource
	}
	// RBAC reaches every server within moments; the reader's list is
	// retried until it is allowed.
	err = wait.For(ctx, "certify/rbac-reaches-servers", readerUser+" to list "+r.Key()+" through "+old.Name,
		func(ctx context.Context) (bool, string, error) {
			err := reader.Discovery().RESTClient().Get().AbsPath(path).Do(ctx).Error()
			if err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
	if err != nil {
		return both("%v", err)
	}
	deny := nobody.Discovery().RESTClient().Get().AbsPath(path).Do(ctx).Error()
	allowedID, deniedID := readerIDs.last(), nobodyIDs.last()

	// Audit logs are written as requests complete: give them a moment.
	var atPeer *audit.Event
	var peerName string
	var deniedAtPeers []string
	var entry *audit.Event
	_ = wait.For(ctx, "certify/audit-written", "the audit events of both requests", func(ctx context.Context) (bool, string, error) {
		atPeer, deniedAtPeers = nil, nil
		for _, p := range w.New {
			if e, _ := completedAt(c, p.Name, allowedID); e != nil {
				atPeer, peerName = e, p.Name
			}
			if e, _ := completedAt(c, p.Name, deniedID); e != nil {
				deniedAtPeers = append(deniedAtPeers, p.Name)
			}
		}
		entry, _ = completedAt(c, old.Name, deniedID)
		return atPeer != nil && entry != nil, "", nil
	})

	var out []certify.Verdict
	switch {
	case allowedID == "":
		out = append(out, fail(identity, "the list through %s came back without an Audit-Id", old.Name))
	case atPeer == nil:
		out = append(out, fail(identity, "no newer apiserver (%v) logged audit ID %s of %s's list through %s", names(w.New), allowedID, readerUser, old.Name))
	case atPeer.User.Username != readerUser || !slices.Contains(atPeer.User.Groups, "system:serviceaccounts"):
		out = append(out, fail(identity, "%s logged audit ID %s as %q %v, not as %s", peerName, allowedID, atPeer.User.Username, atPeer.User.Groups, readerUser))
	default:
		out = append(out, certify.Verdict{ID: identity, Outcome: certify.Pass, Evidence: []string{
			fmt.Sprintf("audit ID %s: %s listed %s through %s; %s logged it as %s %v", allowedID, readerUser, r.Key(), old.Name, peerName, atPeer.User.Username, atPeer.User.Groups)}})
	}
	switch {
	case !apierrors.IsForbidden(deny):
		out = append(out, fail(rbac, "%s listing %s through %s: %v, want 403", nobodyUser, r.Key(), old.Name, deny))
	case len(deniedAtPeers) > 0:
		out = append(out, fail(rbac, "the denied request (audit ID %s) reached %v", deniedID, deniedAtPeers))
	case entry == nil || entry.ResponseStatus == nil || entry.ResponseStatus.Code != http.StatusForbidden:
		out = append(out, fail(rbac, "%s did not log the denied request (audit ID %s) with 403", old.Name, deniedID))
	default:
		out = append(out, certify.Verdict{ID: rbac, Outcome: certify.Pass, Evidence: []string{
			fmt.Sprintf("audit ID %s: %s got 403 from %s, which logged it; no newer apiserver logged it", deniedID, nobodyUser, old.Name)}})
	}
	return out
}

// all is every Audit-Id kept, in order.
func (a *auditIDs) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

// CheckAudit judges mvp.audit.complete and mvp.audit.final-stage on
// requests made through an older apiserver and forwarded (ids, their
// Audit-Ids): each is logged once by the entry server and once by one
// newer peer, under the same audit ID, as the same user; and each ends at
// the entry server in a final stage that is not Panic.
func CheckAudit(ctx context.Context, c *cluster.Cluster, w *Window, ids []string) []certify.Verdict {
	const complete, final = "mvp.audit.complete", "mvp.audit.final-stage"
	old := w.Old[0]
	if len(ids) == 0 {
		return []certify.Verdict{fail(complete, "no request to account for"), fail(final, "no request to account for")}
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	read := func(node string) (map[string][]audit.Event, error) {
		evs, err := audit.Read(audit.LogPath(c, node), func(e *audit.Event) bool {
			return want[string(e.AuditID)] && (e.Stage == "ResponseComplete" || e.Stage == "Panic")
		})
		out := map[string][]audit.Event{}
		for _, e := range evs {
			out[string(e.AuditID)] = append(out[string(e.AuditID)], e)
		}
		return out, err
	}
	var entry, peers map[string][]audit.Event
	var missing, dup, otherUser, panicked []string
	err := wait.For(ctx, "certify/audit-written", fmt.Sprintf("%d requests' audit events", len(ids)), func(ctx context.Context) (bool, string, error) {
		var err error
		if entry, err = read(old.Name); err != nil {
			return false, "", err
		}
		peers = map[string][]audit.Event{}
		for _, p := range w.New {
			got, err := read(p.Name)
			if err != nil {
				return false, "", err
			}
			for id, evs := range got {
				peers[id] = append(peers[id], evs...)
			}
		}
		missing, dup, otherUser, panicked = nil, nil, nil, nil
		for id := range want {
			e, p := entry[id], peers[id]
			switch {
			case len(e) == 0 || len(p) == 0:
				missing = append(missing, id)
			case len(e) > 1 || len(p) > 1:
				dup = append(dup, id)
			case e[0].User.Username != p[0].User.Username:
				otherUser = append(otherUser, fmt.Sprintf("%s (%s at the entry, %s at the peer)", id, e[0].User.Username, p[0].User.Username))
			}
			if len(e) == 1 && e[0].Stage == "Panic" {
				panicked = append(panicked, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d of %d not yet in both logs", len(missing), len(want)), nil
	})
	counted := fmt.Sprintf("%d sent through %s; %d logged there, %d at the peers; %d missing, %d duplicated, %d under another user",
		len(want), old.Name, len(entry), len(peers), len(missing), len(dup), len(otherUser))
	var out []certify.Verdict
	switch {
	case err != nil && len(missing) == 0:
		out = append(out, fail(complete, "%v", err))
	case len(missing)+len(dup)+len(otherUser) > 0:
		v := fail(complete, "%s", counted)
		v.Evidence = append(append(append([]string{}, missing...), dup...), otherUser...)
		out = append(out, v)
	default:
		out = append(out, certify.Verdict{ID: complete, Outcome: certify.Pass, Evidence: []string{counted}})
	}
	if len(panicked) > 0 {
		v := fail(final, "%d of %d proxied requests ended at %s in stage Panic (the watch its client closed among them), where the peer logged ResponseComplete", len(panicked), len(want), old.Name)
		v.Evidence = panicked
		out = append(out, v)
	} else {
		out = append(out, certify.Verdict{ID: final, Outcome: certify.Pass, Evidence: []string{fmt.Sprintf("%d requests ended at %s in ResponseComplete", len(want), old.Name)}})
	}
	return out
}
