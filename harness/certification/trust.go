package certification

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// trustNamespace holds the service accounts the trust checks act as.
const trustNamespace = "skewer-certify-trust"

// asServiceAccount is a client of s acting as a new service account of
// trustNamespace, and its user name.
func asServiceAccount(ctx context.Context, admin kubernetes.Interface, s Server, name string) (*kubernetes.Clientset, *auditIDs, string, error) {
	tok, err := serviceAccountToken(ctx, admin, trustNamespace, name)
	if err != nil {
		return nil, nil, "", err
	}
	cfg := rest.AnonymousClientConfig(s.Config)
	cfg.BearerToken = tok
	ids := &auditIDs{}
	cs, err := kubernetes.NewForConfig(ids.config(cfg))
	return cs, ids, "system:serviceaccount:" + trustNamespace + ":" + name, err
}

// serviceAccountToken is a token of service account name in ns, made
// first if it is not there.
func serviceAccountToken(ctx context.Context, admin kubernetes.Interface, ns, name string) (string, error) {
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tok, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tok.Status.Token, nil
}

// CheckTrust judges proxy.trust.identity and proxy.trust.rbac-at-entry: a
// service account allowed to list the window's resource lists it through
// an older apiserver, and the newer peer's audit log records the request
// under the same audit ID as that service account, not as the entry
// server; one denied a verb on it (the first of list, create and delete
// its roles do not grant: some resources are world-readable) is answered
// 403 by the entry server - also when it forges the front proxy's
// identity headers as system:masters - and no peer logs either request.
func CheckTrust(ctx context.Context, c *cluster.Cluster, w *Window) []promise.Verdict {
	const identity, uid, rbac = "proxy.trust.identity", "proxy.trust.uid", "proxy.trust.rbac-at-entry"
	both := func(format string, args ...any) []promise.Verdict {
		return []promise.Verdict{fail(identity, format, args...), fail(uid, format, args...), fail(rbac, format, args...), fail(forgedHeadersID, format, args...)}
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
	// A verb the cluster's own roles do not give every user (some
	// resources are world-readable: ClusterTrustBundles are).
	verb, err := deniedVerb(ctx, nobody, r)
	if err != nil {
		return both("%v", err)
	}
	deny := request(nobody, verb, path).Do(ctx).Error()
	allowedID, deniedID := readerIDs.last(), nobodyIDs.last()
	// The same user forging the front proxy's identity headers is still
	// itself: the apiserver trusts them only from its request-header CA.
	forged := request(nobody, verb, path).
		SetHeader("X-Remote-User", "kubernetes-admin").SetHeader("X-Remote-Group", "system:masters").Do(ctx).Error()
	forgedID := nobodyIDs.last()
	// An allowed user forging them on a request that is forwarded, and
	// marking one as already proxied: neither may act as anyone else.
	forwardedForged := reader.Discovery().RESTClient().Get().AbsPath(path).
		SetHeader("X-Remote-User", "kubernetes-admin").SetHeader("X-Remote-Group", "system:masters").Do(ctx).Error()
	forwardedForgedID := readerIDs.last()
	marked := reader.Discovery().RESTClient().Get().AbsPath(path).SetHeader("X-Kubernetes-Peer-Proxied", "true").Do(ctx).Error()
	markedID := readerIDs.last()

	// Audit logs are written as requests complete: give them a moment.
	var atPeer *audit.Event
	var peerName string
	var deniedAtPeers []string
	var entry, forgedEntry, allowedEntry, forgedAtPeer, markedEntry *audit.Event
	var markedAtPeers []audit.Event
	_ = wait.For(ctx, "certify/audit-written", "the audit events of the three requests", func(ctx context.Context) (bool, string, error) {
		atPeer, deniedAtPeers, forgedAtPeer, markedAtPeers = nil, nil, nil, nil
		for _, p := range w.New {
			if e, _ := completedAt(c, p.Name, allowedID); e != nil {
				atPeer, peerName = e, p.Name
			}
			if e, _ := completedAt(c, p.Name, forwardedForgedID); e != nil {
				forgedAtPeer = e
			}
			if e, _ := completedAt(c, p.Name, markedID); e != nil {
				markedAtPeers = append(markedAtPeers, *e)
			}
			for _, id := range []string{deniedID, forgedID} {
				if e, _ := completedAt(c, p.Name, id); e != nil {
					deniedAtPeers = append(deniedAtPeers, p.Name+" ("+id+")")
				}
			}
		}
		entry, _ = completedAt(c, old.Name, deniedID)
		forgedEntry, _ = completedAt(c, old.Name, forgedID)
		allowedEntry, _ = completedAt(c, old.Name, allowedID)
		markedEntry, _ = completedAt(c, old.Name, markedID)
		return atPeer != nil && entry != nil && forgedEntry != nil && allowedEntry != nil && forgedAtPeer != nil && markedEntry != nil, "", nil
	})

	seen := trustSeen{reader: readerUser, nobody: nobodyUser, verb: verb, key: r.Key(), entry: old.Name, peers: names(w.New),
		allowedID: allowedID, peer: peerName, atPeer: atPeer, allowedEntry: allowedEntry,
		deny: deny, forged: forged, deniedID: deniedID, forgedID: forgedID, deniedAtPeers: deniedAtPeers, deniedEntry: entry, forgedEntry: forgedEntry,
		uidHeaders: func(node string) string { return uidHeaders(ctx, c, node) }}
	out := []promise.Verdict{identityVerdict(seen)}
	out = append(out, forgedHeaders(forgedVerdictInput{
		reader: readerUser, entry: old.Name, forwarded: forwardedForged, forwardedID: forwardedForgedID, atPeer: forgedAtPeer,
		marked: marked, markedID: markedID, markedEntry: markedEntry, markedAtPeers: markedAtPeers,
		denied: forged, deniedID: forgedID, deniedEntry: forgedEntry, nobody: nobodyUser,
	}))
	return append(out, uidVerdict(seen), rbacVerdict(seen))
}

// trustSeen is what CheckTrust saw: the allowed user's list (reader,
// through entry, logged by peer), and the denied user's request (nobody
// asking to verb key), plain and with identity headers forged.
type trustSeen struct {
	reader, nobody, verb, key, entry string
	// peers are the newer apiservers' names.
	peers []string
	// The allowed list: its audit ID, the peer that logged it and the
	// final events at the peer and at the entry.
	allowedID, peer      string
	atPeer, allowedEntry *audit.Event
	// The denied requests: how each was answered, their audit IDs, the
	// peers that logged either, and their final events at the entry.
	deny, forged             error
	deniedID, forgedID       string
	deniedAtPeers            []string
	deniedEntry, forgedEntry *audit.Event
	// uidHeaders says what a node's apiserver runs with as
	// --requestheader-uid-headers: the evidence of a UID lost.
	uidHeaders func(node string) string
}

// identityVerdict judges proxy.trust.identity: the peer logged the
// allowed list as the reader, with the entry's groups and extra.
func identityVerdict(in trustSeen) promise.Verdict {
	const identity = "proxy.trust.identity"
	switch {
	case in.allowedID == "":
		return fail(identity, "the list through %s came back without an Audit-Id", in.entry)
	case in.atPeer == nil:
		return fail(identity, "no newer apiserver (%v) logged audit ID %s of %s's list through %s", in.peers, in.allowedID, in.reader, in.entry)
	case in.atPeer.User.Username != in.reader || !slices.Contains(in.atPeer.User.Groups, "system:serviceaccounts"):
		return fail(identity, "%s logged audit ID %s as %q %v, not as %s", in.peer, in.allowedID, in.atPeer.User.Username, in.atPeer.User.Groups, in.reader)
	case in.allowedEntry == nil:
		return fail(identity, "%s did not log audit ID %s of %s's list", in.entry, in.allowedID, in.reader)
	case !slices.Equal(in.atPeer.User.Groups, in.allowedEntry.User.Groups) || !equalExtra(in.atPeer.User.Extra, in.allowedEntry.User.Extra):
		return fail(identity, "audit ID %s: %s logged groups %v and extra %v, the entry server %s groups %v and extra %v",
			in.allowedID, in.peer, in.atPeer.User.Groups, in.atPeer.User.Extra, in.entry, in.allowedEntry.User.Groups, in.allowedEntry.User.Extra)
	}
	return promise.Verdict{ID: identity, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("audit ID %s: %s listed %s through %s; %s logged it as %s %v with the entry server's extra %v", in.allowedID, in.reader, in.key, in.entry, in.peer, in.atPeer.User.Username, in.atPeer.User.Groups, in.atPeer.User.Extra)}}
}

// uidVerdict judges proxy.trust.uid: the peer logged the allowed list with
// the UID the entry logged. The UID travels in its own header
// (X-Remote-Uid), which a peer reads only when its
// --requestheader-uid-headers names it.
func uidVerdict(in trustSeen) promise.Verdict {
	const uid = "proxy.trust.uid"
	switch {
	case in.atPeer == nil || in.allowedEntry == nil:
		return fail(uid, "no audit event of %s's list at both servers (audit ID %s)", in.reader, in.allowedID)
	case in.allowedEntry.User.UID == "":
		return fail(uid, "%s logged %s without a UID: nothing to compare", in.entry, in.reader)
	case in.atPeer.User.UID != in.allowedEntry.User.UID:
		v := fail(uid, "audit ID %s: the entry server %s logged %s with UID %s, the peer %s with UID %q", in.allowedID, in.entry, in.reader, in.allowedEntry.User.UID, in.peer, in.atPeer.User.UID)
		v.Evidence = []string{fmt.Sprintf("%s --requestheader-uid-headers: %s", in.peer, in.uidHeaders(in.peer))}
		return v
	}
	return promise.Verdict{ID: uid, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("audit ID %s: UID %s at %s and at %s", in.allowedID, in.atPeer.User.UID, in.entry, in.peer)}}
}

// rbacVerdict judges proxy.trust.rbac-at-entry: the denied user got 403
// from the entry, which logged it as itself, forged headers or not, and
// no peer logged either request.
func rbacVerdict(in trustSeen) promise.Verdict {
	const rbac = "proxy.trust.rbac-at-entry"
	switch {
	case !apierrors.IsForbidden(in.deny):
		return fail(rbac, "%s asking to %s %s through %s: %v, want 403", in.nobody, in.verb, in.key, in.entry, in.deny)
	case !apierrors.IsForbidden(in.forged):
		return fail(rbac, "%s asking to %s %s through %s with forged X-Remote-User/X-Remote-Group (system:masters): %v, want 403", in.nobody, in.verb, in.key, in.entry, in.forged)
	case len(in.deniedAtPeers) > 0:
		return fail(rbac, "denied requests reached %v", in.deniedAtPeers)
	case in.deniedEntry == nil || in.deniedEntry.ResponseStatus == nil || in.deniedEntry.ResponseStatus.Code != http.StatusForbidden:
		return fail(rbac, "%s did not log the denied request (audit ID %s) with 403", in.entry, in.deniedID)
	case in.forgedEntry == nil || in.forgedEntry.User.Username != in.nobody:
		return fail(rbac, "%s did not log the forged request (audit ID %s) as %s: %v", in.entry, in.forgedID, in.nobody, in.forgedEntry)
	}
	return promise.Verdict{ID: rbac, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("audit ID %s: %s asking to %s got 403 from %s, which logged it; no newer apiserver logged it", in.deniedID, in.nobody, in.verb, in.entry),
		fmt.Sprintf("audit ID %s: with X-Remote-User kubernetes-admin and X-Remote-Group system:masters forged, still 403, logged by %s as %s", in.forgedID, in.entry, in.forgedEntry.User.Username)}}
}

// deniedVerb is the first of list, create and delete that user (a client
// acting as it) may not do on r, as the cluster's authorizer answers a
// SelfSubjectAccessReview: what the RBAC check then asks for.
func deniedVerb(ctx context.Context, user kubernetes.Interface, r discovery.Resource) (string, error) {
	for _, verb := range []string{"list", "create", "delete"} {
		review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authzv1.ResourceAttributes{Group: r.Group, Version: r.Version, Resource: r.Resource, Verb: verb, Namespace: map[bool]string{true: trustNamespace}[r.Namespaced]}}}
		got, err := user.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("access review of %s on %s: %w", verb, r.Key(), err)
		}
		if !got.Status.Allowed {
			return verb, nil
		}
	}
	return "", fmt.Errorf("every user may list, create and delete %s: no request of theirs to deny", r.Key())
}

// request is verb on the collection at path (delete: a name that does
// not exist; authorization comes before the object is looked up or the
// body read).
func request(cs kubernetes.Interface, verb, path string) *rest.Request {
	rc := cs.Discovery().RESTClient()
	switch verb {
	case "create":
		return rc.Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body([]byte("{}"))
	case "delete":
		return rc.Delete().AbsPath(path, "skewer-nothing")
	}
	return rc.Get().AbsPath(path)
}

// equalExtra says whether two users' extra attributes are the same.
func equalExtra(a, b map[string]authnv1.ExtraValue) bool {
	return maps.EqualFunc(a, b, func(x, y authnv1.ExtraValue) bool { return slices.Equal(x, y) })
}

// uidHeaders is what node's apiserver runs with as
// --requestheader-uid-headers, or says it is not set.
func uidHeaders(ctx context.Context, c *cluster.Cluster, node string) string {
	n, err := c.Node(ctx, node)
	if err != nil {
		return err.Error()
	}
	flags, err := apiserverFlags(ctx, n)
	if err != nil {
		return err.Error()
	}
	for _, f := range flags {
		if v, ok := strings.CutPrefix(f, "--requestheader-uid-headers="); ok {
			return v
		}
	}
	return "not set"
}

// forgedHeadersID is the promise forgedHeaders judges.
const forgedHeadersID = "proxy.trust.forged-headers"

// forgedVerdictInput is what CheckTrust saw of the forged requests.
type forgedVerdictInput struct {
	reader, nobody, entry string
	// An allowed user's forwarded request with X-Remote-User/Group forged
	// as the admin, and what the peer logged of it.
	forwarded   error
	forwardedID string
	atPeer      *audit.Event
	// The allowed user's request marked X-Kubernetes-Peer-Proxied.
	marked        error
	markedID      string
	markedEntry   *audit.Event
	markedAtPeers []audit.Event
	// The denied user's request with the identity headers forged.
	denied      error
	deniedID    string
	deniedEntry *audit.Event
}

// forgedHeaders judges proxy.trust.forged-headers: forged identity headers
// leave a user itself, on a request that is forwarded (the peer logs the
// real user, without system:masters) as on one that is denied (403, the
// entry server logs the real user); a forged hop marker is served by the
// entry server itself or forwarded as the same user, never more.
func forgedHeaders(in forgedVerdictInput) promise.Verdict {
	masters := func(e *audit.Event) bool { return slices.Contains(e.User.Groups, "system:masters") }
	switch {
	case in.forwarded != nil:
		return fail(forgedHeadersID, "%s's list with forged X-Remote-User/Group through %s: %v, want it served as %s", in.reader, in.entry, in.forwarded, in.reader)
	case in.atPeer == nil:
		return fail(forgedHeadersID, "no peer logged %s's forwarded list with forged headers (audit ID %s)", in.reader, in.forwardedID)
	case in.atPeer.User.Username != in.reader || masters(in.atPeer):
		return fail(forgedHeadersID, "audit ID %s: the peer logged %s's forwarded list with forged headers as %q %v", in.forwardedID, in.reader, in.atPeer.User.Username, in.atPeer.User.Groups)
	case in.marked != nil && !apierrors.IsNotFound(in.marked):
		return fail(forgedHeadersID, "%s's list marked X-Kubernetes-Peer-Proxied through %s: %v, want its own 404 or the list", in.reader, in.entry, in.marked)
	case in.markedEntry == nil || in.markedEntry.User.Username != in.reader:
		return fail(forgedHeadersID, "%s did not log %s's marked list as %s (audit ID %s)", in.entry, in.reader, in.reader, in.markedID)
	case slices.ContainsFunc(in.markedAtPeers, func(e audit.Event) bool { return e.User.Username != in.reader || masters(&e) }):
		return fail(forgedHeadersID, "audit ID %s: a peer logged %s's marked list as someone else", in.markedID, in.reader)
	case !apierrors.IsForbidden(in.denied) || in.deniedEntry == nil || in.deniedEntry.User.Username != in.nobody:
		return fail(forgedHeadersID, "%s with forged headers through %s: %v, logged as %v; want 403 as %s", in.nobody, in.entry, in.denied, in.deniedEntry, in.nobody)
	}
	marked := "served by the entry server itself (404)"
	if in.marked == nil {
		marked = fmt.Sprintf("forwarded as %s", in.reader)
	}
	return promise.Verdict{ID: forgedHeadersID, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("audit ID %s: %s forging kubernetes-admin/system:masters on a forwarded list: the peer logged %s %v", in.forwardedID, in.reader, in.atPeer.User.Username, in.atPeer.User.Groups),
		fmt.Sprintf("audit ID %s: %s marking its list X-Kubernetes-Peer-Proxied: %s", in.markedID, in.reader, marked),
		fmt.Sprintf("audit ID %s: %s forging them on a denied request: 403, logged as %s", in.deniedID, in.nobody, in.deniedEntry.User.Username)}}
}
