package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
)

// Options shape the traffic.
type Options struct {
	// Namespace holds the objects the writers make (default skewer-traffic).
	Namespace string
	// Interval between two rounds of a stream through the load balancer
	// (default 500ms): the client's view, which rollout.disruption-budget
	// judges as a share of failed requests and the longest unavailability.
	// A share does not depend on the rate (an outage fails the same part
	// of any rate), and unavailability is resolved to one interval: 500 ms
	// is 30 looks within the 15 s bound. A faster rate buys nothing a
	// promise judges and costs the cluster it measures (every write goes
	// through etcd's three members and every apiserver's audit log); the
	// rounds at 200 ms were latency-bound anyway.
	Interval time.Duration
	// DirectInterval is the same for a stream straight to one apiserver
	// (default 1s). Those streams are measured, not held to the budget:
	// what they judge are counts (a lost write, a false 404 or 403 at
	// that backend), and a round a second still probes each backend about
	// sixty times in a minute-long step. Every request costs the
	// apiserver, its audit log and etcd's members; at the load balancer's
	// rate the streams of five apiservers kept two cores busy and slowed
	// every step they were measuring (session 18: one control plane, two
	// streams at 200 ms, 42 requests a second, the host 12% busy idle and
	// 66% with them).
	DirectInterval time.Duration
	// Timeout of each request (default 5s).
	Timeout time.Duration
	// NewAPIPath is a collection only newer apiservers serve, e.g.
	// /apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies. A
	// 404 for it is false when the apiserver that answered advertised it:
	// its peer-merged discovery listed it at the start and at the end of
	// the phase (through the load balancer: every apiserver's did). Until
	// then the cluster has not yet offered the resource - how long that
	// takes after a newer apiserver serves is proxy.discovery.converges. The
	// proxy routes by the very cache its merged discovery shows (k8s.io/
	// apiserver pkg/util/peerproxy: findServiceableByPeerFromPeerDiscovery-
	// Cache and GetPeerResources read one peer-discovery cache), so an
	// apiserver that advertises the resource and answers 404 contradicts
	// itself.
	NewAPIPath string
}

const writeLabel = "skewer.io/traffic"

// A stream's connections: every target gets a stream of each kind, since
// a rollout treats them differently (a layer-4 load balancer keeps an
// established connection on its backend; only a new one is balanced).
const (
	// Reused is a client kept for the whole stream, its connection kept
	// alive between requests: what a controller or kubectl in a loop does.
	Reused = "reused"
	// New dials a new connection for every request: what a client that
	// arrives in the middle of the rollout meets.
	New = "new"
)

// stream names one request stream: a target and its kind of connection.
type stream struct{ target, conn string }

// Traffic is running request streams.
type Traffic struct {
	c    *cluster.Cluster
	opts Options
	ctx  context.Context

	mu      sync.Mutex
	records []Record
	phase   string
	// faults are when a fault was injected on purpose (Fault): the last
	// one open while its phase lasts.
	faults  []span
	streams map[stream]context.CancelFunc
	acked   map[string]bool
	seen    map[string]bool // delivered by the watch
	// advertised says, per target ("lb" or an apiserver), whether its
	// merged discovery lists NewAPIPath now (for "lb": every apiserver's).
	advertised map[string]bool
	// phaseAdvertised is advertised at a phase's start and at its end:
	// only then is a 404 for the new API through that target false.
	phaseAdvertised map[string]map[string]bool
	phases          int
	seq             atomic.Int64
	wg              sync.WaitGroup
	stopAll         context.CancelFunc
}

// Start begins the streams: through the load balancer and through each
// control plane's own apiserver, one on a reused connection and one on
// new connections each, and a watch through the load balancer.
func Start(ctx context.Context, c *cluster.Cluster, opts Options) (*Traffic, error) {
	if opts.Namespace == "" {
		opts.Namespace = "skewer-traffic"
	}
	if opts.Interval == 0 {
		opts.Interval = 500 * time.Millisecond
	}
	if opts.DirectInterval == 0 {
		opts.DirectInterval = time.Second
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("failed to create namespace %s: %w", opts.Namespace, err)
	}
	t := newTraffic(ctx, c, opts)
	if err := t.watch(cs); err != nil {
		t.stopAll()
		return nil, err
	}
	t.startStreams("lb", cfg)
	if err := t.Refresh(ctx); err != nil {
		t.end()
		return nil, err
	}
	t.mu.Lock()
	t.phaseAdvertised[t.phase] = maps.Clone(t.advertised)
	t.mu.Unlock()
	return t, nil
}

// Phase refreshes the streams (see Refresh) and names the phase the
// following records belong to.
func (t *Traffic) Phase(ctx context.Context, name string) error {
	err := t.Refresh(ctx)
	t.endPhase()
	t.mu.Lock()
	defer t.mu.Unlock()
	// Numbered: a step that repeats (each node's join) is a phase of its own.
	t.phases++
	t.phase = fmt.Sprintf("%02d %s", t.phases, name)
	if n := len(t.faults); n > 0 && t.faults[n-1].to.IsZero() {
		t.faults[n-1].to = time.Now()
	}
	t.phaseAdvertised[t.phase] = maps.Clone(t.advertised)
	return err
}

// Fault begins a phase, as Phase does, in which a fault is injected on
// purpose: the requests under way at any time of it are marked
// (Record.Fault), for the fault's own promises to judge; the rollout's
// disruption budget leaves them out (Disruption). The next Phase ends it.
func (t *Traffic) Fault(ctx context.Context, name string) error {
	err := t.Phase(ctx, name)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.faults = append(t.faults, span{from: time.Now()})
	return err
}

// span is a stretch of time; a zero to is one still open.
type span struct{ from, to time.Time }

// overlap says whether a request under way from from to to was so during
// any of spans: one that began before a fault and ended in it (a timeout
// the fault caused) is the fault's, and so is one it left unanswered past
// its end.
func overlap(spans []span, from, to time.Time) bool {
	for _, s := range spans {
		if s.from.Before(to) && (s.to.IsZero() || s.to.After(from)) {
			return true
		}
	}
	return false
}

// endPhase keeps, of what the current phase's targets advertised at its
// start, what they still advertise.
func (t *Traffic) endPhase() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for target, ok := range t.phaseAdvertised[t.phase] {
		t.phaseAdvertised[t.phase][target] = ok && t.advertised[target]
	}
}

// Refresh follows the control planes: a stream for each new one, none for
// one that is gone, and whether an apiserver serving the new API is there.
func (t *Traffic) Refresh(ctx context.Context) error {
	cps, err := t.c.ControlPlanes(ctx)
	if err != nil {
		return err
	}
	current := map[string]bool{}
	advertised := map[string]bool{}
	for _, n := range cps {
		current[n.Name] = true
		cfg, err := t.c.APIServerConfig(ctx, n)
		if err != nil {
			continue // not published yet: the next refresh takes it
		}
		t.mu.Lock()
		_, running := t.streams[stream{n.Name, Reused}]
		t.mu.Unlock()
		// A stream starts once the apiserver says it is ready, as a client
		// behind a readiness-checking balancer would meet it.
		if !running && !ready(ctx, cfg) {
			continue
		}
		if t.opts.NewAPIPath != "" {
			advertised[n.Name] = advertises(ctx, cfg, t.opts.NewAPIPath)
		}
		if !running {
			t.startStreams(n.Name, cfg)
		}
	}
	all := len(advertised) > 0
	for _, ok := range advertised {
		all = all && ok
	}
	advertised["lb"] = all
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advertised = advertised
	for st, stop := range t.streams {
		if st.target != "lb" && !current[st.target] {
			stop()
			delete(t.streams, st)
		}
	}
	return nil
}

// ready says whether the apiserver answers /readyz with ok.
func ready(ctx context.Context, cfg *rest.Config) bool {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	return cluster.Readyz(ctx, cs) == nil
}

// advertises says whether the apiserver cfg talks to lists path's
// collection in its peer-merged discovery: what clients are offered.
func advertises(ctx context.Context, cfg *rest.Config, path string) bool {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	set, err := discovery.Merged(ctx, cs)
	if err != nil {
		return false
	}
	for _, r := range set {
		if r.Path() == path {
			return true
		}
	}
	return false
}

func serverVersion(cfg *rest.Config) string {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return ""
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return ""
	}
	return v.GitVersion
}

func (t *Traffic) add(r Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.Phase, r.Fault = t.phase, overlap(t.faults, r.Time, time.Now())
	t.records = append(t.records, r)
}

// WriteRecords keeps every request made so far as JSON in path (its
// directory made as needed): the evidence a summary rests on.
func (t *Traffic) WriteRecords(path string) (int, error) {
	records := t.Records()
	b, err := json.Marshal(records)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	return len(records), os.WriteFile(path, b, 0o644)
}

// Records are the requests made so far, in the order they were made.
func (t *Traffic) Records() []Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Record(nil), t.records...)
}

// Ended are the records of every phase that has ended (Phase began
// another), and whether a target advertised NewAPIPath from a phase's
// start to its end: a 404 for it through that target then is false.
// What a guard reads once a step is over.
func (t *Traffic) Ended() ([]Record, func(phase, target string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Record
	for _, r := range t.records {
		if r.Phase != t.phase {
			out = append(out, r)
		}
	}
	advertised := map[string]map[string]bool{}
	for phase, targets := range t.phaseAdvertised {
		if phase != t.phase {
			advertised[phase] = maps.Clone(targets)
		}
	}
	return out, func(phase, target string) bool { return advertised[phase][target] }
}

// Targets are the apiservers the traffic streams to now: Refresh (and so
// Phase) follows the control planes.
func (t *Traffic) Targets() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]bool{}
	for st := range t.streams {
		if st.target != "lb" {
			out[st.target] = true
		}
	}
	return out
}

// newTraffic is traffic with no stream yet, whose streams and watch end
// with ctx (the run's: an interrupted or failed run does not leave them
// writing into a cluster being exported and deleted), with Stop, or with
// Delete.
func newTraffic(ctx context.Context, c *cluster.Cluster, opts Options) *Traffic {
	runCtx, cancel := context.WithCancel(ctx)
	return &Traffic{c: c, opts: opts, ctx: runCtx, stopAll: cancel, phase: "start",
		streams: map[stream]context.CancelFunc{}, acked: map[string]bool{}, seen: map[string]bool{},
		phaseAdvertised: map[string]map[string]bool{}}
}

// end ends every stream and the watch, and waits for the streams.
func (t *Traffic) end() {
	t.stopAll()
	t.wg.Wait()
}

// Delete removes the traffic's namespace.
func (t *Traffic) Delete(ctx context.Context) error {
	t.end() // a run that failed before Stop leaves them running
	cs, err := t.c.Client()
	if err != nil {
		return err
	}
	return cs.CoreV1().Namespaces().Delete(ctx, t.opts.Namespace, metav1.DeleteOptions{})
}
