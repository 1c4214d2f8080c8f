package certification

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
	"github.com/skewer-k8s/skewer/internal/source"
)

// rerouted is the proxy's counter of requests an apiserver forwarded.
const rerouted = "apiserver_rerouted_request_total"

// Server is one apiserver, addressed directly (not through the load
// balancer).
type Server struct {
	Name    string
	Version version.Version
	Config  *rest.Config
}

func (s Server) client() (*kubernetes.Clientset, error) { return kubernetes.NewForConfig(s.Config) }

// WithTimeout is s with every request given timeout.
func (s Server) WithTimeout(timeout time.Duration) Server {
	cfg := rest.CopyConfig(s.Config)
	cfg.Timeout = timeout
	return Server{Name: s.Name, Version: s.Version, Config: cfg}
}

// traced is a client of s that keeps the Audit-Id of every response.
func (s Server) traced() (*kubernetes.Clientset, *auditIDs, error) {
	ids := &auditIDs{}
	cs, err := kubernetes.NewForConfig(ids.config(s.Config))
	return cs, ids, err
}

// Window is a cluster held in the mixed window as the proxy's checks see
// it: the apiservers at the older version and at the newer, and a
// resource only the newer ones serve, found by comparing discovery -
// nothing in the checks names a resource of one version.
type Window struct {
	Old, New []Server
	Resource discovery.Resource
}

// OpenWindow reads the window c is in: its apiservers split by whether
// they run newer, and, of onlyNewer (what CheckDiscovery found), the
// first routable resource with a sample object, else the first routable.
func OpenWindow(ctx context.Context, c *cluster.Cluster, newer version.Version, onlyNewer []discovery.Resource) (*Window, error) {
	w, err := SplitWindow(ctx, c, newer)
	if err != nil {
		return nil, err
	}
	var routable []discovery.Resource
	for _, r := range onlyNewer {
		if r.Routable() {
			routable = append(routable, r)
		}
	}
	if len(routable) == 0 {
		return nil, fmt.Errorf("%w: %s serves no routable resource the older apiservers lack (%d only it serves)", ErrNothingToRoute, newer, len(onlyNewer))
	}
	w.Resource = routable[0]
	for _, r := range routable {
		if _, err := os.Stat(samplePath(r)); err == nil {
			w.Resource = r
			break
		}
	}
	return w, nil
}

// ErrNothingToRoute is OpenWindow's error when the pair offers no
// resource only the newer version serves: the proxy has nothing to route.
var ErrNothingToRoute = errors.New("nothing to route")

// SplitWindow reads the window c is in as its apiservers split by whether
// they run newer, with no resource: what the checks that need none (the
// runtime-config variant) take.
func SplitWindow(ctx context.Context, c *cluster.Cluster, newer version.Version) (*Window, error) {
	all, err := servers(ctx, c)
	if err != nil {
		return nil, err
	}
	w := &Window{}
	for _, s := range all {
		if s.Version == newer {
			w.New = append(w.New, s)
		} else {
			w.Old = append(w.Old, s)
		}
	}
	if len(w.Old) == 0 || len(w.New) == 0 {
		return nil, fmt.Errorf("not a mixed window: %d control plane(s) at %s of %d", len(w.New), newer, len(all))
	}
	return w, nil
}

// RouteWorks waits until the window's resource is served through the
// first older apiserver: the proxy's peer discovery may lag the resource
// discovery a moment after a step, and every check starts from a working
// route. It returns how long that took.
func (w *Window) RouteWorks(ctx context.Context, ns string) (time.Duration, error) {
	start := time.Now()
	api, err := w.api(w.Old[0], ns)
	if err != nil {
		return 0, err
	}
	// What the server last answered is the evidence; a request the wait's
	// own deadline cut short says nothing of the route.
	var answered string
	err = wait.For(ctx, "certify/route-works", fmt.Sprintf("%s to be served through %s", w.Resource.Key(), w.Old[0].Name),
		func(ctx context.Context) (bool, string, error) {
			_, err := api.List(ctx, metav1.ListOptions{Limit: 1})
			var st apierrors.APIStatus
			switch {
			case err == nil:
				return true, "", nil
			case errors.As(err, &st):
				answered = fmt.Sprintf("%d %s", st.Status().Code, st.Status().Message)
			case ctx.Err() == nil:
				answered = err.Error()
			}
			return false, answered, nil
		})
	return time.Since(start), err
}

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

// waitDiscovery waits, within the budget certify/discovery-converges,
// until unwanted finds nothing in view (discovery.Local or
// discovery.Merged) of any of servers; what says what it waits for, and
// the last state seen names each server and what was still there.
func waitDiscovery(ctx context.Context, servers []Server, view func(context.Context, kubernetes.Interface) (discovery.Set, error),
	what string, unwanted func(discovery.Set) []string) error {
	return wait.For(ctx, "certify/discovery-converges", what, func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, s := range servers {
			cs, err := s.client()
			if err != nil {
				return false, "", err
			}
			set, err := view(ctx, cs)
			if err != nil {
				left = append(left, s.Name+": "+err.Error())
				continue
			}
			for _, u := range unwanted(set) {
				left = append(left, s.Name+" "+u)
			}
		}
		return len(left) == 0, strings.Join(left, ", "), nil
	})
}

// servers are c's apiservers, each addressed directly, with its version.
func servers(ctx context.Context, c *cluster.Cluster) ([]Server, error) {
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return nil, err
	}
	versions, err := rollout.NodeVersions(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []Server
	for _, n := range cps {
		cfg, err := c.APIServerConfig(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Server{Name: n.Name, Version: versions[n.Name], Config: cfg})
	}
	return out, nil
}

// CheckAllOld judges proxy.rollback.all-old once every control plane is
// back at the older version: the object from before is intact, and the
// resource only the newer version served answers a true 404 on every
// apiserver, which serves it itself (no other apiserver logs it).
func CheckAllOld(ctx context.Context, c *cluster.Cluster, r discovery.Resource, before *corev1.ConfigMap) promise.Verdict {
	const id = "proxy.rollback.all-old"
	if err := Intact(ctx, c, before); err != nil {
		return fail(id, "%v", err)
	}
	all, err := servers(ctx, c)
	if err != nil {
		return fail(id, "%v", err)
	}
	for _, s := range all {
		cs, ids, err := s.traced()
		if err != nil {
			return fail(id, "%v", err)
		}
		got := cs.Discovery().RESTClient().Get().AbsPath(r.Path()).Do(ctx).Error()
		if v := goneAfterRollback(r, s, got); v != nil {
			return *v
		}
		if err := notForwarded(ctx, c, s, all, ids.all()); err != nil {
			return fail(id, "after the rollback: %v", err)
		}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("the object from before intact; %s: 404 on %v, each logged by the server asked alone", r.Key(), names(all))}}
}

// goneAfterRollback judges proxy.rollback.all-old on how s, once every
// control plane is back at the older version, answered for r, the
// resource only the newer version served: nil when with a true 404.
func goneAfterRollback(r discovery.Resource, s Server, got error) *promise.Verdict {
	if apierrors.IsNotFound(got) {
		return nil
	}
	v := fail("proxy.rollback.all-old", "%s on %s (%s) after the rollback: %v, want 404 (no server serves it now)", r.Path(), s.Name, s.Version, got)
	return &v
}

// samplePath is where the repository keeps a sample object of r.
func samplePath(r discovery.Resource) string {
	root, err := source.Root()
	if err != nil {
		return ""
	}
	return filepath.Join(root, "clusters", "samples", r.Group, r.Version, r.Resource+".yaml")
}

// sample reads the sample object of r, or says there is none.
func sample(r discovery.Resource) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(samplePath(r))
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", samplePath(r), err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// api is the window's resource through one server; the Audit-Id of each
// response goes to ids when it is given.
func (w *Window) api(s Server, ns string, ids ...*auditIDs) (dynamic.ResourceInterface, error) {
	cfg := s.Config
	if len(ids) > 0 {
		cfg = ids[0].config(cfg)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	gvr := schema.GroupVersionResource{Group: w.Resource.Group, Version: w.Resource.Version, Resource: w.Resource.Resource}
	if w.Resource.Namespaced {
		return dc.Resource(gvr).Namespace(ns), nil
	}
	return dc.Resource(gvr), nil
}

// routeLabel marks what the routing check makes, by run.
const routeLabel = "skewer.io/certify-route"

// mark labels obj, an object of the window's resource, as made by run,
// in ns when the resource is namespaced.
func (w *Window) mark(obj *unstructured.Unstructured, run, ns string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[routeLabel] = run
	obj.SetLabels(labels)
	if w.Resource.Namespaced {
		obj.SetNamespace(ns)
	}
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
	run := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffffff)
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

// scrape reads s's /metrics.
func scrape(ctx context.Context, s Server) (metrics.Snapshot, error) {
	cs, err := s.client()
	if err != nil {
		return nil, err
	}
	return metrics.Scrape(ctx, cs)
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
	all := append(append([]Server{}, w.Old...), w.New...)
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

// names lists servers' names, sorted.
func names(ss []Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// The CRD and the APIService CheckScope makes: a group only the cluster's
// own extension servers serve, and one whose backend does not exist.
const (
	scopeCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.certify.skewer.io"},
 "spec":{"group":"certify.skewer.io","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	scopeAPIService = `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
 "metadata":{"name":"v1.certify-agg.skewer.io"},
 "spec":{"group":"certify-agg.skewer.io","version":"v1","groupPriorityMinimum":1000,"versionPriority":15,
  "insecureSkipTLSVerify":true,"service":{"namespace":"default","name":"skewer-nowhere","port":443}}}`
	// fastFail bounds the answer for an APIService without a backend.
	fastFail = 5 * time.Second
)

// CheckScope judges proxy.scope.crd-apiservice: a CRD's resource is served
// by every apiserver itself, and an APIService without a backend answers
// 503 within fastFail on every apiserver; neither is forwarded (no other
// apiserver logs the requests).
func CheckScope(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.scope.crd-apiservice"
	admin, err := w.Old[0].client()
	if err != nil {
		return fail(id, "%v", err)
	}
	rc := admin.Discovery().RESTClient()
	objects := map[string]string{
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions": scopeCRD,
		"/apis/apiregistration.k8s.io/v1/apiservices":             scopeAPIService,
	}
	for path, body := range objects {
		err := rc.Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fail(id, "create %s: %v", path, err)
		}
	}
	all := append(append([]Server{}, w.Old...), w.New...)
	defer func() {
		ctx := context.WithoutCancel(ctx)
		_ = rc.Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.certify.skewer.io").Do(ctx).Error()
		_ = rc.Delete().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1.certify-agg.skewer.io").Do(ctx).Error()
		// Gone from every apiserver's discovery before the next check
		// compares their views: each drops a deleted CRD in its own time.
		_ = waitDiscovery(ctx, all, discovery.Local, "the scope check's groups gone from every apiserver's discovery", func(local discovery.Set) []string {
			var left []string
			for _, r := range local {
				if strings.HasSuffix(r.Group, ".skewer.io") {
					left = append(left, "serves "+r.Key())
				}
			}
			return left
		})
	}()
	var ev []string
	for _, s := range all {
		cs, err := s.client()
		if err != nil {
			return fail(id, "%v", err)
		}
		// The CRD's resource, once this server has established it.
		err = wait.For(ctx, "certify/crd-established", "widgets served by "+s.Name, func(ctx context.Context) (bool, string, error) {
			if err := cs.Discovery().RESTClient().Get().AbsPath("/apis/certify.skewer.io/v1/namespaces/default/widgets").Do(ctx).Error(); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
		if err != nil {
			return fail(id, "%v", err)
		}
		tcs, ids, err := s.traced()
		if err != nil {
			return fail(id, "%v", err)
		}
		src := tcs.Discovery().RESTClient()
		crdErr := src.Get().AbsPath("/apis/certify.skewer.io/v1/namespaces/default/widgets").Do(ctx).Error()
		start := time.Now()
		aggErr := src.Get().AbsPath("/apis/certify-agg.skewer.io/v1/things").Do(ctx).Error()
		took := time.Since(start)
		if v := scopeAnswers(s, crdErr, aggErr, took); v != nil {
			return *v
		}
		if err := notForwarded(ctx, c, s, all, ids.all()); err != nil {
			return fail(id, "%v", err)
		}
		ev = append(ev, fmt.Sprintf("%s: widgets 200, APIService 503 in %s", s.Name, took.Round(time.Millisecond)))
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: append(ev, "each logged by the server asked alone")}
}

// scopeAnswers judges proxy.scope.crd-apiservice on how s answered for
// the CRD's widgets (crdErr) and for the APIService without a backend
// (aggErr, after took): nil when both held.
func scopeAnswers(s Server, crdErr, aggErr error, took time.Duration) *promise.Verdict {
	const id = "proxy.scope.crd-apiservice"
	var code int32
	if st, ok := aggErr.(apierrors.APIStatus); ok {
		code = st.Status().Code
	}
	var v promise.Verdict
	switch {
	case crdErr != nil:
		v = fail(id, "a CRD's widgets on %s (%s): %v", s.Name, s.Version, crdErr)
	case code != 503 || took > fastFail:
		v = fail(id, "an APIService without a backend on %s (%s): %v in %s, want 503 within %s", s.Name, s.Version, aggErr, took.Round(time.Millisecond), fastFail)
	default:
		return nil
	}
	return &v
}

// NewerOnly is what the apiservers at newer serve locally and every
// other apiserver lacks, found by comparing their discovery; nothing
// while the cluster is not in a mixed window.
func NewerOnly(ctx context.Context, c *cluster.Cluster, newer version.Version) ([]discovery.Resource, error) {
	all, err := servers(ctx, c)
	if err != nil {
		return nil, err
	}
	only, _, err := newerOnly(ctx, all, newer)
	return only, err
}

// newerOnly is NewerOnly over the apiservers all, and whether they are
// in a mixed window at all (some at newer, some not).
func newerOnly(ctx context.Context, all []Server, newer version.Version) ([]discovery.Resource, bool, error) {
	newLocal, oldLocal := discovery.Set{}, discovery.Set(nil)
	for _, s := range all {
		cs, err := s.client()
		if err != nil {
			return nil, false, err
		}
		local, err := discovery.Local(ctx, cs)
		if err != nil {
			return nil, false, fmt.Errorf("local discovery of %s: %w", s.Name, err)
		}
		switch {
		case s.Version == newer:
			maps.Copy(newLocal, local)
		case oldLocal == nil:
			oldLocal = local
		default:
			maps.DeleteFunc(oldLocal, func(k string, _ discovery.Resource) bool { _, ok := local[k]; return !ok })
		}
	}
	if len(newLocal) == 0 || oldLocal == nil {
		return nil, false, nil
	}
	return discovery.OnlyIn(newLocal, oldLocal), true, nil
}

// firstRoutable is the path of the first of rs the proxy can route, "" if none.
func firstRoutable(rs []discovery.Resource) string {
	for _, r := range rs {
		if r.Routable() {
			return r.Path()
		}
	}
	return ""
}
