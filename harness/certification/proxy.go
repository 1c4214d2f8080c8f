package certification

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// ProxyPromises are the Mixed Version Proxy's promises CheckProxy judges.
var ProxyPromises = []promise.ID{"proxy.route.no-false-forwarding", "proxy.route.loop-guard", "proxy.metrics.rerouted", "proxy.route.verbs",
	"proxy.trust.identity", "proxy.trust.uid", "proxy.trust.forged-headers", "proxy.trust.rbac-at-entry", "proxy.scope.crd-apiservice", "proxy.audit.complete", "proxy.audit.final-stage", "proxy.audit.watch-final-stage"}

// CheckProxy judges every one of ProxyPromises in the window, from a
// working route (RouteWorks): routing of every verb through an older
// apiserver, no false forwarding, the loop guard, the rerouted count, the
// audit trail of the routed requests, identity and RBAC, and the scope.
// The window and how long the route took to work are the first evidence
// of proxy.route.verbs. When the route never works, proxy.route.verbs fails
// with what the server answered, and the others could not be judged.
func CheckProxy(ctx context.Context, c *cluster.Cluster, w *Window) []promise.Verdict {
	const ns = "default"
	var vs []promise.Verdict
	took, err := w.RouteWorks(ctx, ns)
	if err != nil {
		// The route itself is proxy.route.verbs's promise: it failed. The
		// others are about a route that works, and could not be judged.
		for _, id := range ProxyPromises {
			if id == "proxy.route.verbs" {
				vs = append(vs, fail(id, "%v", err))
			} else {
				vs = append(vs, promise.Errored(id, "the proxy never routed the window's resource, so this could not be judged: %v", err))
			}
		}
		return vs
	}
	vs = append(vs, CheckNoFalseForwarding(ctx, c, w), CheckLoopGuard(ctx, w), CheckRerouted(ctx, w, ns, 5))
	ids := &auditIDs{}
	route := CheckRouteVerbs(ctx, w, ns, ids)
	route.Evidence = append([]string{fmt.Sprintf("window: %v at %s, %v at %s; %s served through %s %s after discovery converged",
		names(w.Old), w.Old[0].Version, names(w.New), w.New[0].Version, w.Resource.Key(), w.Old[0].Name, took.Round(100*time.Millisecond))},
		route.Evidence...)
	vs = append(vs, route)
	vs = append(vs, CheckAudit(ctx, c, w, ids.all())...)
	vs = append(vs, CheckTrust(ctx, c, w)...)
	return append(vs, CheckScope(ctx, c, w))
}

// CheckRouteVerbs judges proxy.route.verbs: through an older apiserver
// alone, the window's resource is created, read, listed, updated, patched,
// watched and deleted; the newer apiserver reads what the older one made,
// and the watch delivers ADDED, MODIFIED and DELETED. Without a sample
// object of the resource only get, list and watch can be routed, and the
// promise is an error, saying which file to add. The audit IDs of the
// requests through the older apiserver go to ids, for CheckAudit.
func CheckRouteVerbs(ctx context.Context, w *Window, ns string, ids *auditIDs) promise.Verdict {
	const id = "proxy.route.verbs"
	old, peer := w.Old[0], w.New[0]
	key := w.Resource.Key()
	api, err := w.api(old, ns, ids)
	if err != nil {
		return fail(id, "%v", err)
	}
	peerAPI, err := w.api(peer, ns)
	if err != nil {
		return fail(id, "%v", err)
	}
	run := runID()
	selector := metav1.ListOptions{LabelSelector: routeLabel + "=" + run}
	obj, serr := sample(w.Resource)
	if serr != nil {
		// Read-only routing still proves something; it is the evidence.
		if _, err := api.List(ctx, selector); err != nil {
			return fail(id, "list %s through %s (%s): %v", key, old.Name, old.Version, err)
		}
		return promise.Verdict{ID: id, Outcome: promise.Error,
			Reason:   fmt.Sprintf("no sample object of %s (add one at %s): create, update, patch and delete cannot be routed without one", key, samplePath(w.Resource)),
			Evidence: []string{fmt.Sprintf("list %s through %s (%s): 200", key, old.Name, old.Version)}}
	}
	w.mark(obj, run, ns)

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	wi, err := api.Watch(wctx, selector)
	if err != nil {
		return fail(id, "watch %s through %s: %v", key, old.Name, err)
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		for ev := range wi.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Bookmark {
				events <- string(ev.Type) + " " + u.GetName()
			}
		}
	}()

	var done []string
	step := func(what string, fn func() error) error {
		if err := fn(); err != nil {
			return fmt.Errorf("%s %s through %s (%s), after %v: %w", what, key, old.Name, old.Version, done, err)
		}
		done = append(done, what)
		return nil
	}
	var made, got *unstructured.Unstructured
	if err := step("create", func() (err error) { made, err = api.Create(ctx, obj, metav1.CreateOptions{}); return err }); err != nil {
		return fail(id, "%v", err)
	}
	name := made.GetName()
	defer api.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	for _, s := range []struct {
		what string
		fn   func() error
	}{
		{"get", func() (err error) { got, err = api.Get(ctx, name, metav1.GetOptions{}); return err }},
		{"list", func() error {
			l, err := api.List(ctx, selector)
			if err == nil && len(l.Items) != 1 {
				err = fmt.Errorf("%d objects, want the one made", len(l.Items))
			}
			return err
		}},
		{"update", func() error {
			l := got.GetLabels()
			l["skewer.io/updated"] = "true"
			got.SetLabels(l)
			_, err := api.Update(ctx, got, metav1.UpdateOptions{})
			return err
		}},
		{"patch", func() error {
			_, err := api.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"skewer.io/patched":"true"}}}`), metav1.PatchOptions{})
			return err
		}},
		{"read it back through the newer apiserver", func() error {
			seen, err := peerAPI.Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				return err
			case seen.GetUID() != made.GetUID():
				return fmt.Errorf("%s has UID %s there, %s here", name, seen.GetUID(), made.GetUID())
			case seen.GetLabels()["skewer.io/updated"] != "true" || seen.GetAnnotations()["skewer.io/patched"] != "true":
				return fmt.Errorf("%s lacks the update or the patch there", name)
			}
			return nil
		}},
		{"delete", func() error { return api.Delete(ctx, name, metav1.DeleteOptions{}) }},
	} {
		if err := step(s.what, s.fn); err != nil {
			return fail(id, "%v", err)
		}
	}
	want := []string{"ADDED " + name, "MODIFIED " + name, "DELETED " + name}
	seen, failed := watched(old.Name, events, want, time.After(20*time.Second))
	if failed != nil {
		return *failed
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("%s through %s (%s) alone: %s, watch delivered %s; %s (%s) read the same object", key, old.Name, old.Version,
			strings.Join(done, ", "), strings.Join(seen, ", "), peer.Name, peer.Version)}}
}

// watched reads what the watch through entry delivers (events) until
// every one of want came, and says what it delivered; when not all of
// want came (the watch ended, or deadline, 20 s on, passed), the failure
// of proxy.route.verbs.
func watched(entry string, events <-chan string, want []string, deadline <-chan time.Time) ([]string, *promise.Verdict) {
	const id = "proxy.route.verbs"
	var seen []string
	for len(missing(want, seen)) > 0 {
		select {
		case ev, ok := <-events:
			if !ok {
				v := fail(id, "the watch through %s ended early; it delivered %v", entry, seen)
				return seen, &v
			}
			seen = append(seen, ev)
		case <-deadline:
			v := fail(id, "the watch through %s delivered %v in 20s, not %v", entry, seen, missing(want, seen))
			return seen, &v
		}
	}
	return seen, nil
}

// missing is what of want is not in seen.
func missing(want, seen []string) []string {
	var out []string
	for _, w := range want {
		found := false
		for _, s := range seen {
			found = found || s == w
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

// CheckRerouted judges proxy.metrics.rerouted: n gets of names that do not
// exist, through an older apiserver, answer 404 from the newer peer (a
// code nothing else in a quiet cluster provokes), and the older server's
// rerouted counter for code 404 moves by exactly n.
func CheckRerouted(ctx context.Context, w *Window, ns string, n int) promise.Verdict {
	const id = "proxy.metrics.rerouted"
	old := w.Old[0]
	api, err := w.api(old, ns)
	if err != nil {
		return fail(id, "%v", err)
	}
	before, err := scrape(ctx, old)
	if err != nil {
		return fail(id, "%v", err)
	}
	for i := range n {
		_, err := api.Get(ctx, fmt.Sprintf("skewer-missing-%d-%d", time.Now().UnixNano(), i), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fail(id, "get of a missing %s through %s: %v, want 404", w.Resource.Key(), old.Name, err)
		}
	}
	after, err := scrape(ctx, old)
	if err != nil {
		return fail(id, "%v", err)
	}
	return reroutedVerdict(old.Name, w.Resource.Key(), n, before, after)
}

// reroutedVerdict judges proxy.metrics.rerouted on entry's scrapes before
// and after n gets of missing objects of key forwarded through it.
func reroutedVerdict(entry, key string, n int, before, after metrics.Snapshot) promise.Verdict {
	const id = "proxy.metrics.rerouted"
	moved, err := metrics.Delta(before, after, rerouted, map[string]string{"code": "404"})
	if err != nil {
		return fail(id, "%s after %d gets forwarded through it: %v", entry, n, err)
	}
	ev := fmt.Sprintf("%s{code=404} on %s moved by %g for %d gets of missing %s; series after: %v", rerouted, entry, moved, n, key, after.Series(rerouted))
	if moved != float64(n) {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: []string{ev},
			Reason: fmt.Sprintf("%s{code=404} on %s moved by %g, not by the %d requests it forwarded", rerouted, entry, moved, n)}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{ev}}
}

// CheckNoFalseForwarding judges proxy.route.no-false-forwarding: on every
// apiserver, paths no server serves (an unknown group, an unknown
// resource and an unknown version of the window's group) answer 404, no
// other apiserver's audit log has them, and the rerouted counter of the
// server asked does not move - where it is not exported at all (a server
// that never forwarded since it started, as a newer one in the window),
// the audit logs alone prove it; the first older server, which the route
// check went through, must export it.
func CheckNoFalseForwarding(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.route.no-false-forwarding"
	r := w.Resource
	paths := []string{"/apis/nothing.skewer.io/v1/things", "/apis/" + r.Group + "/" + r.Version + "/skewernothings", "/apis/" + r.Group + "/v999/" + r.Resource}
	var ev []string
	all := w.all()
	for i, s := range all {
		cs, ids, err := s.traced()
		if err != nil {
			return fail(id, "%v", err)
		}
		before, err := scrape(ctx, s)
		if err != nil {
			return fail(id, "%v", err)
		}
		for _, p := range paths {
			err := cs.Discovery().RESTClient().Get().AbsPath(p).Do(ctx).Error()
			if !apierrors.IsNotFound(err) {
				return fail(id, "%s on %s (%s): %v, want 404", p, s.Name, s.Version, err)
			}
		}
		after, err := scrape(ctx, s)
		if err != nil {
			return fail(id, "%v", err)
		}
		said, v := unmoved(s.Name, i > 0, paths, before, after)
		if v != nil {
			return *v
		}
		ev = append(ev, said)
		if err := notForwarded(ctx, c, s, all, ids.all()); err != nil {
			return fail(id, "%v", err)
		}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{fmt.Sprintf("%v: 404 on %s, each logged by the server asked alone", paths, strings.Join(ev, ", "))}}
}

// unmoved judges proxy.route.no-false-forwarding on server's rerouted
// counter before and after it was asked for paths no server serves:
// what it says for the evidence, or the failure. A server other than the
// first older one (mayLack) may not export the counter at all.
func unmoved(server string, mayLack bool, paths []string, before, after metrics.Snapshot) (string, *promise.Verdict) {
	const id = "proxy.route.no-false-forwarding"
	d, err := metrics.Delta(before, after, rerouted, map[string]string{"code": "404"})
	var v promise.Verdict
	switch {
	case errors.Is(err, metrics.ErrNotExported) && mayLack:
		return server + " (counter not exported: never forwarded)", nil
	case err != nil:
		v = fail(id, "%s: %v", server, err)
	case d != 0:
		v = fail(id, "%s{code=404} on %s moved by %g for paths no server serves (%v): forwarded", rerouted, server, d, paths)
	default:
		return server + " (counter unmoved)", nil
	}
	return "", &v
}

// CheckLoopGuard judges proxy.route.loop-guard: the window's resource asked
// of an older apiserver with X-Kubernetes-Peer-Proxied: true is answered
// by that server itself (404, its counter unmoved), and the same request
// unmarked is forwarded (200): the mark, not the resource, made the 404.
func CheckLoopGuard(ctx context.Context, w *Window) promise.Verdict {
	const id = "proxy.route.loop-guard"
	old := w.Old[0]
	cs, err := old.client()
	if err != nil {
		return fail(id, "%v", err)
	}
	path := w.Resource.Path()
	before, err := scrape(ctx, old)
	if err != nil {
		return fail(id, "%v", err)
	}
	marked := cs.Discovery().RESTClient().Get().AbsPath(path).SetHeader("X-Kubernetes-Peer-Proxied", "true").Do(ctx).Error()
	after, err := scrape(ctx, old)
	if err != nil {
		return fail(id, "%v", err)
	}
	return loopGuardVerdict(old, path, marked, before, after, func() error {
		return cs.Discovery().RESTClient().Get().AbsPath(path).Do(ctx).Error()
	})
}

// loopGuardVerdict judges proxy.route.loop-guard on how old answered path
// marked proxied (marked) and its scrapes around it; unmarked asks for the
// same path unmarked, once the marked request held.
func loopGuardVerdict(old Server, path string, marked error, before, after metrics.Snapshot, unmarked func() error) promise.Verdict {
	const id = "proxy.route.loop-guard"
	if !apierrors.IsNotFound(marked) {
		return fail(id, "%s marked proxied, through %s (%s): %v, want its own 404", path, old.Name, old.Version, marked)
	}
	d, err := metrics.Delta(before, after, rerouted, map[string]string{"code": "404"})
	if err != nil {
		return fail(id, "%s: %v", old.Name, err)
	}
	if d != 0 {
		return fail(id, "%s{code=404} on %s moved by %g for a request marked proxied: forwarded again", rerouted, old.Name, d)
	}
	if err := unmarked(); err != nil {
		return fail(id, "%s unmarked, through %s: %v, want it forwarded", path, old.Name, err)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("%s through %s: marked proxied 404, counter unmoved; unmarked 200", path, old.Name)}}
}
