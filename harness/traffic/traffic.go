package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/wait"
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
	t.phaseAdvertised[t.phase] = maps.Clone(t.advertised)
	return err
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
	r.Phase = t.phase
	t.records = append(t.records, r)
}

// startStreams starts target's two streams, on a reused connection and on
// new connections.
func (t *Traffic) startStreams(target string, cfg *rest.Config) {
	for _, conn := range []string{Reused, New} {
		st := stream{target, conn}
		ctx, cancel := context.WithCancel(t.ctx)
		t.mu.Lock()
		t.streams[st] = cancel
		t.mu.Unlock()
		cfg := rest.CopyConfig(cfg)
		cfg.Timeout = t.opts.Timeout
		cfg.QPS, cfg.Burst = -1, 0 // the stream's own interval paces it
		if conn == New {
			newConnections(cfg)
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.stream(ctx, st, cfg)
		}()
	}
}

// newConnections makes a client built from cfg dial a new connection for
// every request: its own transport (a Dial of its own keeps client-go from
// sharing a cached one) and every request asking to close its connection
// after the response, which HTTP/2 honours as well as HTTP/1.1.
func newConnections(cfg *rest.Config) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	cfg.Dial = dialer.DialContext
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return closeEach{rt} })
}

type closeEach struct{ rt http.RoundTripper }

func (c closeEach) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Close = true
	return c.rt.RoundTrip(req)
}

func (c closeEach) CancelRequest(req *http.Request) { cancel(c.rt, req) }

// auditID keeps the Audit-Id the apiserver gave the latest response of
// one stream's client (a stream makes one request at a time), so a record
// can be found in the audit logs.
type auditID struct {
	mu   sync.Mutex
	last string
}

func (a *auditID) wrap(rt http.RoundTripper) http.RoundTripper { return auditIDRoundTripper{a, rt} }

// take is the latest response's Audit-Id, once: "" when no response came.
func (a *auditID) take() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.last
	a.last = ""
	return id
}

type auditIDRoundTripper struct {
	a  *auditID
	rt http.RoundTripper
}

func (k auditIDRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := k.rt.RoundTrip(req)
	if resp != nil {
		k.a.mu.Lock()
		k.a.last = resp.Header.Get("Audit-Id")
		k.a.mu.Unlock()
	}
	return resp, err
}

func (k auditIDRoundTripper) CancelRequest(req *http.Request) { cancel(k.rt, req) }

// cancel passes a timed-out request's cancellation on to rt, as client-go's
// own round trippers do: one that cannot take it makes them log a warning
// on every timeout.
func cancel(rt http.RoundTripper, req *http.Request) {
	if c, ok := rt.(interface{ CancelRequest(*http.Request) }); ok {
		c.CancelRequest(req)
	}
}

// stream writes a ConfigMap carrying a sequence number, reads it back and
// asks for the new API, every interval, until ctx ends. On new
// connections it only writes: one request per connection is the point,
// and the write is the request that needs the whole apiserver (etcd too).
func (t *Traffic) stream(ctx context.Context, st stream, cfg *rest.Config) {
	target := st.target
	ids := &auditID{}
	cfg.Wrap(ids.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	server := serverVersion(cfg)
	interval := t.opts.DirectInterval
	if target == "lb" {
		interval = t.opts.Interval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for round := 1; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if round%25 == 0 {
			if v := serverVersion(cfg); v != "" {
				server = v
			}
		}
		seq := t.seq.Add(1)
		name := fmt.Sprintf("w-%07d-%s-%s", seq, strings.TrimPrefix(target, t.c.Name+"-"), st.conn)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{writeLabel: "write"}},
			Data:       map[string]string{"seq": fmt.Sprint(seq), "target": target},
		}
		start := time.Now()
		_, err := cs.CoreV1().ConfigMaps(t.opts.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		code := statusCode(err, http.StatusCreated)
		if ctx.Err() != nil {
			return
		}
		t.add(Record{Time: start, Target: target, Conn: st.conn, Server: server, Verb: "create", Object: "configmaps/" + name,
			Code: code, Latency: time.Since(start), Err: errString(err), Probe: "write", AuditID: ids.take()})
		if code == http.StatusCreated {
			t.mu.Lock()
			t.acked[name] = true
			t.mu.Unlock()
		}
		if st.conn == New {
			continue
		}
		if code == http.StatusCreated {
			start = time.Now()
			_, err = cs.CoreV1().ConfigMaps(t.opts.Namespace).Get(ctx, name, metav1.GetOptions{})
			t.add(Record{Time: start, Target: target, Conn: st.conn, Server: server, Verb: "get", Object: "configmaps/" + name,
				Code: statusCode(err, http.StatusOK), Latency: time.Since(start), Err: errString(err), Probe: "read", AuditID: ids.take()})
		}
		if t.opts.NewAPIPath != "" {
			start = time.Now()
			var status int
			err := cs.Discovery().RESTClient().Get().AbsPath(t.opts.NewAPIPath).Do(ctx).StatusCode(&status).Error()
			if status == 0 {
				status = statusCode(err, http.StatusOK)
			}
			t.add(Record{Time: start, Target: target, Conn: st.conn, Server: server, Verb: "list", Object: t.opts.NewAPIPath,
				Code: status, Latency: time.Since(start), Err: errString(err), Probe: "new-api", AuditID: ids.take()})
		}
	}
}

func statusCode(err error, ok int) int {
	if err == nil {
		return ok
	}
	if s, isStatus := err.(apierrors.APIStatus); isStatus && s.Status().Code != 0 {
		return int(s.Status().Code)
	}
	return 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// watch keeps an informer on the written objects through the load
// balancer; it relists and rewatches across apiserver restarts as any
// controller would.
func (t *Traffic) watch(cs kubernetes.Interface) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(t.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = writeLabel + "=write" }))
	inf := f.Core().V1().ConfigMaps().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			t.mu.Lock()
			t.seen[cm.Name] = true
			t.mu.Unlock()
		}
	}})
	if err != nil {
		return err
	}
	f.Start(t.ctx.Done())
	return nil
}

// Records returns a copy of every record so far.
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

// Stop ends the streams and accounts for every acknowledged write: a final
// list through the load balancer must find it, and the watch must have
// delivered it (given a grace period to catch up).
func (t *Traffic) Stop(ctx context.Context) (Summary, error) {
	t.mu.Lock()
	for _, stop := range t.streams {
		stop()
	}
	t.mu.Unlock()
	t.wg.Wait()
	defer t.stopAll()
	_ = t.Refresh(ctx)
	t.endPhase()

	cfg, err := t.c.RESTConfig()
	if err != nil {
		return Summary{}, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Summary{}, err
	}
	list, err := cs.CoreV1().ConfigMaps(t.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: writeLabel + "=write"})
	if err != nil {
		return Summary{}, fmt.Errorf("failed to list the written objects: %w", err)
	}
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
	}
	var s Summary
	err = wait.For(ctx, "traffic/watch-catch-up", "the watch to deliver every acknowledged write", func(context.Context) (bool, string, error) {
		s = t.account(stored)
		return len(s.MissedWatchEvents) == 0, fmt.Sprintf("%d not delivered", len(s.MissedWatchEvents)), nil
	})
	// The catch-up is a grace period, not a promise: the events the watch
	// has still not delivered when it ends are reported in s, not as an
	// error. A cancelled context is, lest a grace period cut short be
	// reported as events the watch missed.
	if err != nil && ctx.Err() != nil {
		return Summary{}, fmt.Errorf("failed to account for the traffic: %w", err)
	}
	sort.Strings(s.LostWrites)
	sort.Strings(s.MissedWatchEvents)
	for _, p := range s.Phases {
		s.FalseNotFound += p.FalseNotFound
	}
	t.mu.Lock()
	var forbidden []Record
	for _, r := range t.records {
		if r.Probe == "new-api" && r.Code == http.StatusNotFound && t.phaseAdvertised[r.Phase][r.Target] {
			s.FalseNotFoundRecords = append(s.FalseNotFoundRecords, r)
		}
		if r.Code == http.StatusForbidden {
			forbidden = append(forbidden, r)
		}
	}
	records := t.records
	t.mu.Unlock()
	if len(forbidden) > 0 {
		if s.Forbidden, err = t.explain(forbidden, records); err != nil {
			return Summary{}, err
		}
	}
	if len(s.FalseNotFoundRecords) > 0 {
		if s.NotFound, err = t.explainNotFound(s.FalseNotFoundRecords); err != nil {
			return Summary{}, err
		}
	}
	return s, nil
}

// explainNotFound finds each false 404 in the audit logs, and what the
// apiserver that answered it logged (the cluster's kept apiserver logs).
func (t *Traffic) explainNotFound(notFound []Record) ([]NotFound, error) {
	events, err := t.auditEvents(notFound)
	if err != nil {
		return nil, fmt.Errorf("failed to find the false 404s in the audit logs: %w", err)
	}
	// The apiservers the traffic addressed directly: every control plane
	// the cluster had while it ran, each a peer a rebuild may have missed.
	var nodes []string
	t.mu.Lock()
	for _, r := range t.records {
		if r.Target != "lb" && !slices.Contains(nodes, r.Target) {
			nodes = append(nodes, r.Target)
		}
	}
	t.mu.Unlock()
	return ExplainNotFound(notFound, t.opts.NewAPIPath, events, t.c.APIServerLog, nodes), nil
}

// explain finds each 403 in the audit logs of the apiservers.
func (t *Traffic) explain(forbidden, records []Record) ([]Forbidden, error) {
	events, err := t.auditEvents(forbidden)
	if err != nil {
		return nil, fmt.Errorf("failed to find the 403s in the audit logs: %w", err)
	}
	return ExplainForbidden(forbidden, records, events, t.c.APIServerLog), nil
}

// auditEvents are the final audit events of records, by audit ID, from
// every apiserver's audit log.
func (t *Traffic) auditEvents(records []Record) (map[string][]audit.Logged, error) {
	paths, err := t.c.AuditLogs()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range records {
		ids = append(ids, r.AuditID)
	}
	return audit.Final(paths, ids)
}

// account checks every acknowledged write against stored, the names a
// final list found, and against what the watch has delivered so far.
func (t *Traffic) account(stored map[string]bool) Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	capable := func(phase, target string) bool { return t.phaseAdvertised[phase][target] }
	s := Summary{Requests: len(t.records), Phases: Summarize(t.records, capable), NewAPIProbed: t.opts.NewAPIPath != "",
		Backends: Disruption(t.records), Steps: Steps(t.records)}
	for name := range t.acked {
		if !stored[name] {
			s.LostWrites = append(s.LostWrites, name)
		}
		if !t.seen[name] {
			s.MissedWatchEvents = append(s.MissedWatchEvents, name)
		}
	}
	return s
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
