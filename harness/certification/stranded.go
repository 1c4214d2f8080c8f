package certification

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// Stranded is what a client of the mixed window keeps and meets again
// after a rollback to all-old servers (issue 14 item 9): a discovery cache
// taken through the load balancer while the newer-only resource was
// offered, and an object of that resource made through an older apiserver
// (so by the proxy) and left in place.
type Stranded struct {
	resource discovery.Resource
	gvr      schema.GroupVersionResource
	cached   cdiscovery.CachedDiscoveryInterface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	taken    time.Time
	// object is the name of what was made, "" without a sample object.
	object string
}

// Strand takes the window's discovery into a cache, as kubectl or a
// controller would hold it, and makes an object of its resource through
// the first older apiserver, which the rollback will leave behind.
func Strand(ctx context.Context, c *cluster.Cluster, w *Window) (*Stranded, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	dc, err := cdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r := w.Resource
	s := &Stranded{resource: r, gvr: schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource},
		cached: memory.NewMemCacheClient(dc), taken: time.Now()}
	s.mapper = restmapper.NewDeferredDiscoveryRESTMapper(s.cached)
	if _, err := s.mapper.KindFor(s.gvr); err != nil {
		return nil, fmt.Errorf("the load balancer's discovery does not offer %s in the window: %w", r.Key(), err)
	}
	obj, err := sample(r)
	if err != nil {
		return s, nil // the discovery part alone still shows something
	}
	obj.SetName("")
	obj.SetGenerateName("skewer-stranded-")
	api, err := w.api(w.Old[0], "default")
	if err != nil {
		return nil, err
	}
	made, err := api.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create %s through %s: %w", r.Key(), w.Old[0].Name, err)
	}
	s.object = made.GetName()
	return s, nil
}

// AfterRollback says what the cluster, back at all-old servers, does with
// what Strand kept: how long until no apiserver's merged discovery offers
// the resource, what the client holding the window's discovery meets
// before and after it invalidates its cache, and where the object made in
// the window is (no apiserver serves it; its key in etcd).
func (s *Stranded) AfterRollback(ctx context.Context, c *cluster.Cluster) []string {
	var out []string
	start := time.Now()
	all, err := servers(ctx, c)
	if err != nil {
		return []string{fmt.Sprintf("after the rollback: %v", err)}
	}
	err = waitDiscovery(ctx, all, discovery.Merged, "no apiserver's merged discovery to offer "+s.resource.Key(), func(merged discovery.Set) []string {
		if _, ok := merged[s.resource.Key()]; ok {
			return []string{"still offers " + s.resource.Key()}
		}
		return nil
	})
	if err != nil {
		out = append(out, fmt.Sprintf("discovery after the rollback: %v", err))
	} else {
		out = append(out, fmt.Sprintf("discovery after the rollback: no apiserver's merged view offers %s (%s after the rollback ended)", s.resource.Key(), time.Since(start).Round(100*time.Millisecond)))
	}
	out = append(out, s.cachedClient(ctx, c))
	if s.object != "" {
		out = append(out, s.objectLeft(ctx, c, all))
	}
	return out
}

// cachedClient is what a client holding the window's discovery meets.
func (s *Stranded) cachedClient(ctx context.Context, c *cluster.Cluster) string {
	age := time.Since(s.taken).Round(time.Second)
	gvk, err := s.mapper.KindFor(s.gvr)
	if err != nil {
		return fmt.Sprintf("a client holding the window's discovery (%s old) no longer maps %s: %v", age, s.resource.Key(), err)
	}
	api, err := s.throughLB(c)
	if err != nil {
		return err.Error()
	}
	_, lerr := api.List(ctx, metav1.ListOptions{Limit: 1})
	s.cached.Invalidate()
	s.mapper.Reset()
	_, after := s.mapper.KindFor(s.gvr)
	return fmt.Sprintf("a client holding the window's discovery (%s old) still maps %s to %s; its list through the load balancer: %v; once it invalidates its cache: %v",
		age, s.resource.Key(), gvk.Kind, orOK(lerr), orOK(after))
}

// objectLeft says where the object made in the window is now.
func (s *Stranded) objectLeft(ctx context.Context, c *cluster.Cluster, all []Server) string {
	var got []string
	for _, sv := range all {
		dc, err := dynamic.NewForConfig(sv.Config)
		if err != nil {
			return err.Error()
		}
		_, err = dc.Resource(s.gvr).Namespace(namespaceFor(s.resource)).Get(ctx, s.object, metav1.GetOptions{})
		got = append(got, fmt.Sprintf("%s: %v", sv.Name, orOK(err)))
	}
	key := "not looked up"
	if cps, err := c.ControlPlanes(ctx); err == nil && len(cps) > 0 {
		out, err := rollout.Etcdctl(ctx, cps[0], "get", "--prefix", "--keys-only", "/registry/")
		switch {
		case err != nil:
			key = err.Error()
		default:
			key = "absent from etcd"
			for _, k := range strings.Fields(out) {
				if strings.HasSuffix(k, "/"+s.object) {
					key = "still in etcd as " + k
				}
			}
		}
	}
	return fmt.Sprintf("the %s %s made through the proxy in the window: %s; %s", s.resource.Resource, s.object, strings.Join(got, ", "), key)
}

// throughLB is the stranded resource through the load balancer, where
// Strand's object lives.
func (s *Stranded) throughLB(c *cluster.Cluster) (dynamic.ResourceInterface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return dc.Resource(s.gvr).Namespace(namespaceFor(s.resource)), nil
}

// namespaceFor is where Strand's object lives: "default" for a namespaced
// resource, none for a cluster-scoped one.
func namespaceFor(r discovery.Resource) string {
	if r.Namespaced {
		return "default"
	}
	return ""
}

func orOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// AfterThrough says whether the object left in the window is served again
// once every apiserver is at the newer version.
func (s *Stranded) AfterThrough(ctx context.Context, c *cluster.Cluster) string {
	if s.object == "" {
		return ""
	}
	api, err := s.throughLB(c)
	if err != nil {
		return err.Error()
	}
	_, err = api.Get(ctx, s.object, metav1.GetOptions{})
	if err == nil {
		_ = api.Delete(ctx, s.object, metav1.DeleteOptions{})
	}
	return fmt.Sprintf("the %s %s left by the rollback, after the roll-through, through the load balancer: %s", s.resource.Resource, s.object, orOK(err))
}
