package mvp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
	"github.com/skewer-k8s/skewer/harness/version"
)

// The resource only the newer version serves, and the metrics the suite
// reads.
const (
	newGroup    = "admissionregistration.k8s.io"
	newVersion  = "v1"
	newResource = "mutatingadmissionpolicies"
	newPath     = "/apis/" + newGroup + "/" + newVersion + "/" + newResource
	rerouted    = "apiserver_rerouted_request_total"
	// peerProxyErrors exists from 1.36.
	peerProxyErrors = "apiserver_peer_proxy_errors_total"
)

// server is one control plane's apiserver, addressed directly.
type server struct {
	cluster.Node
	Version version.Version
	IP      string
	cfg     *rest.Config
}

// window is the cluster held in the mixed window: apiservers at the older
// version and at the newer.
type window struct {
	From, To version.Version
	Old, New []server
	// cert is the same window as certify's checks take it, its resource
	// the one discovery found only the newer apiservers serve.
	cert *certification.Window
}

func (w *window) all() []server { return append(append([]server{}, w.Old...), w.New...) }

// holdWindow brings the cluster to exactly newCount control planes at
// --mvp.to (surging forward or back one node at a time as needed), waits
// until every apiserver's discovery shows the new resource, and returns the
// window. The time discovery took to converge after the step is logged.
func holdWindow(ctx context.Context, t *testing.T, newCount int) *window {
	t.Helper()
	g := NewWithT(t)
	from := fromVersion(t)
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	have := 0
	for _, v := range versions {
		if v == flagTo {
			have++
		}
	}
	if have != newCount {
		back := have > newCount
		// Once a new apiserver serves (the step after the wait for it),
		// time how long every apiserver's discovery takes to show it.
		var converged sync.WaitGroup
		timeDiscovery := func(ctx context.Context, step string) {
			if back || !strings.HasPrefix(step, "add the new node to the load balancer") {
				return
			}
			converged.Add(1)
			go func() {
				defer converged.Done()
				start := time.Now()
				for time.Since(start) < 3*time.Minute && ctx.Err() == nil {
					all, err := apiservers(ctx)
					if err == nil && len(lacking(ctx, all)) == 0 {
						s.Measured(t, "every apiserver's discovery showed %s %s %s after the new apiserver served it",
							newGroup, newResource, time.Since(start).Round(10*time.Millisecond))
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
		r := &rollout.Runner{Out: suite.LogWriter(t), OnStep: timeDiscovery}
		if load != nil {
			r = load.Runner(t, timeDiscovery)
		}
		if back {
			// A step back within the window, not a rollback: the record of
			// where the rollout started stays.
			actions, err := rollout.Surge(ctx, s.Cluster, rollout.SurgeInput{To: from, PauseAfter: have - newCount, AllowDowngrade: true})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Run(ctx, s.Cluster, actions)).To(Succeed())
		} else {
			g.Expect(rollout.Roll(ctx, s.Cluster, rollout.RollInput{
				To: flagTo, Strategy: rollout.StrategySurge, PauseAfter: newCount - have, Runner: r})).To(Succeed())
		}
		converged.Wait()
	}
	w := &window{From: from, To: flagTo}
	for _, sv := range servers(ctx, t) {
		if sv.Version == flagTo {
			w.New = append(w.New, sv)
		} else {
			w.Old = append(w.Old, sv)
		}
	}
	g.Expect(w.New).To(HaveLen(newCount))
	s.Measured(t, "mixed window: %d at %s %v, %d at %s %v", len(w.Old), from, names(w.Old), len(w.New), flagTo, names(w.New))
	// Waits until every apiserver's merged discovery shows what only the
	// newer version serves, the suite's resource among it.
	v, newer, took := certification.CheckDiscovery(ctx, s.Cluster, flagTo)
	s.Judge(t, v)
	g.Expect(v.Outcome).To(Equal(certify.Pass), "every apiserver's discovery shows what only %s serves", flagTo)
	g.Expect(newer).To(ContainElement(HaveField("Resource", newResource)), "what only %s serves", flagTo)
	s.Measured(t, "discovery: %d resource(s) only %s serves %v; every apiserver's merged discovery showed them %s after the window was held",
		len(newer), flagTo, newer, took.Round(100*time.Millisecond))
	w.cert, err = certification.OpenWindow(ctx, s.Cluster, flagTo, newer)
	g.Expect(err).NotTo(HaveOccurred())
	return w
}

// servers are the cluster's apiservers, each addressed directly.
func servers(ctx context.Context, t *testing.T) []server {
	out, err := apiservers(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return out
}

func apiservers(ctx context.Context) ([]server, error) {
	cps, err := s.Cluster.ControlPlanes(ctx)
	if err != nil {
		return nil, err
	}
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	if err != nil {
		return nil, err
	}
	var out []server
	for _, n := range cps {
		cfg, err := s.Cluster.APIServerConfig(ctx, n)
		if err != nil {
			return nil, err
		}
		ip, err := n.IP()
		if err != nil {
			return nil, err
		}
		out = append(out, server{Node: n, Version: versions[n.Name], IP: ip, cfg: cfg})
	}
	return out, nil
}

// fromVersion is the version the cluster was created at: the profile's,
// or -skewer.version.
func fromVersion(t *testing.T) version.Version {
	if s.Spec == nil || s.Spec.Version.IsZero() {
		t.Fatalf("cluster %s has no spec skewer made: its older version is unknown", s.Cluster.Name)
	}
	return s.Spec.Version
}

// lacking lists the servers whose peer-aggregated discovery does not show
// the new resource.
func lacking(ctx context.Context, servers []server) []string {
	var out []string
	for _, sv := range servers {
		res, err := discoveryResources(ctx, sv, false)
		if err != nil || !res[newGroup+"/"+newVersion+"/"+newResource] {
			out = append(out, sv.Name)
		}
	}
	return out
}

// discoveryResources reads sv's aggregated /apis (local only with nopeer)
// as a set of "group/version/resource".
func discoveryResources(ctx context.Context, sv server, nopeer bool) (map[string]bool, error) {
	read := discovery.Merged
	if nopeer {
		read = discovery.Local
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	set, err := read(ctx, sv.client())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sv.Name, err)
	}
	out := map[string]bool{}
	for key := range set {
		out[key] = true
	}
	return out, nil
}

func names(servers []server) []string {
	var out []string
	for _, sv := range servers {
		out = append(out, sv.Name)
	}
	return out
}

// client is an admin client of sv alone.
func (sv server) client() *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(sv.cfg)
}

// traced is an admin client of sv that records every response.
func (sv server) traced() (*kubernetes.Clientset, *tracer) {
	return clientAs(sv.cfg)
}

// clientAs is a client for cfg that records every response.
func clientAs(cfg *rest.Config) (*kubernetes.Clientset, *tracer) {
	tr := &tracer{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(tr.wrap)
	cfg.QPS, cfg.Burst = 100, 200
	return kubernetes.NewForConfigOrDie(cfg), tr
}

func (sv server) scrape(ctx context.Context, t *testing.T) metrics.Snapshot {
	t.Helper()
	snap, err := metrics.Scrape(ctx, sv.client())
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "scrape %s", sv.Name)
	return snap
}

// call is one request as the client saw it.
type call struct {
	Method, Path string
	Code         int
	AuditID      string
	Took         time.Duration
}

func (c call) String() string {
	return fmt.Sprintf("%-6s %-80s %d audit-id %s (%s)", c.Method, c.Path, c.Code, c.AuditID, c.Took.Round(time.Millisecond))
}

// tracer records every response of a client: what the evidence is made of.
type tracer struct {
	mu    sync.Mutex
	calls []call
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (tr *tracer) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := next.RoundTrip(r)
		if err != nil {
			return resp, err
		}
		tr.mu.Lock()
		tr.calls = append(tr.calls, call{Method: r.Method, Path: r.URL.RequestURI(), Code: resp.StatusCode,
			AuditID: resp.Header.Get("Audit-Id"), Took: time.Since(start)})
		tr.mu.Unlock()
		return resp, nil
	})
}

// take returns the calls recorded since the last take.
func (tr *tracer) take() []call {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := tr.calls
	tr.calls = nil
	return out
}
