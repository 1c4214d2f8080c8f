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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/metrics"
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

// local is what s serves itself, said as s's.
func (s Server) local(ctx context.Context) (discovery.Set, error) {
	return s.view(ctx, discovery.Local, "local")
}

// merged is what s lists with its peers' resources merged in.
func (s Server) merged(ctx context.Context) (discovery.Set, error) {
	return s.view(ctx, discovery.Merged, "merged")
}

func (s Server) view(ctx context.Context, read func(context.Context, kubernetes.Interface) (discovery.Set, error), which string) (discovery.Set, error) {
	cs, err := s.client()
	if err != nil {
		return nil, err
	}
	set, err := read(ctx, cs)
	if err != nil {
		return nil, fmt.Errorf("%s discovery of %s: %w", which, s.Name, err)
	}
	return set, nil
}

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

// all are the window's apiservers, the older ones first.
func (w *Window) all() []Server { return append(append([]Server{}, w.Old...), w.New...) }

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

// runID names one check's run: what it makes is labelled with it, so a
// list finds that run's objects and no other's.
func runID() string { return fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffffff) }

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

// scrape reads s's /metrics.
func scrape(ctx context.Context, s Server) (metrics.Snapshot, error) {
	cs, err := s.client()
	if err != nil {
		return nil, err
	}
	return metrics.Scrape(ctx, cs)
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
		local, err := s.local(ctx)
		if err != nil {
			return nil, false, err
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
