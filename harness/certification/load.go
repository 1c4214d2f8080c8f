package certification

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/guard"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/traffic"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// The burst proxy.load.concurrent makes: loadClients clients at once on
// every apiserver of the window, each listing the newer-only resource as
// fast as it is answered, for loadFor; beside them the entry's own
// reader asks every ownEvery for what the entry serves itself. Eight
// clients an apiserver are the controllers of a small cluster listing
// at once; on two cores they keep every apiserver busy.
const (
	loadClients = 8
	loadFor     = 10 * time.Second
	ownEvery    = 100 * time.Millisecond
	// ownP99 bounds the p99 of the entry's own reads: the upstream API
	// call latency SLO for a single object, 1 s.
	ownP99 = time.Second
	// loadNamespace holds the service account the burst lists as.
	loadNamespace = "skewer-certify-load"
)

// answer is one request of the burst: which apiserver was asked, whether
// it forwarded (the resource lives elsewhere), and how it ended.
type answer struct {
	server    string
	forwarded bool
	Attempt
}

// failed is an answer that is not the list asked for: a 5xx or none (the
// objective's failures), or any other refusal - a 404 would be the proxy
// not routing at all. A 429 is counted apart (throttled).
func (a answer) failed() bool { return a.Code != 200 }

// Load is what a burst saw: every answer to the clients, every answer to
// the entries' own readers, and how far each apiserver's rerouted
// counter moved meanwhile (older servers first).
type Load struct {
	Burst, Own []answer
	Rerouted   map[string]float64
	Newer      []string
}

// CheckConcurrentLoad judges proxy.load.concurrent in the window w: many
// clients at once - a service account, so priority and fairness queues
// them as it would a controller - list the newer-only resource through
// every apiserver, while each older entry's own reader (the admin, in
// another priority level)
// asks for what it serves itself; th are the proxy's objective.
func CheckConcurrentLoad(ctx context.Context, w *Window, th promise.GuardThresholds) promise.Verdict {
	const id = "proxy.load.concurrent"
	load, err := burst(ctx, w)
	if err != nil {
		return promise.Errored(id, "%v", err)
	}
	return judgeLoad(load, th)
}

// burst makes the burst in w and reads the counters around it.
func burst(ctx context.Context, w *Window) (*Load, error) {
	all := w.all()
	cfg, cleanup, err := loadAccount(ctx, w)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	before, err := scrapeEach(ctx, all)
	if err != nil {
		return nil, err
	}
	load := &Load{Rerouted: map[string]float64{}, Newer: names(w.New)}
	var mu sync.Mutex
	keep := func(to *[]answer, a answer) {
		mu.Lock()
		defer mu.Unlock()
		*to = append(*to, a)
	}
	bctx, cancel := context.WithTimeout(ctx, loadFor)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range all {
		api, err := w.api(Server{Name: s.Name, Config: cfg(s)}, loadNamespace)
		if err != nil {
			return nil, err
		}
		forwarded := i < len(w.Old)
		for range loadClients {
			wg.Go(func() {
				for bctx.Err() == nil {
					a := Try(start, func() error { _, err := api.List(bctx, metav1.ListOptions{Limit: 1}); return err })
					if bctx.Err() == nil {
						keep(&load.Burst, answer{s.Name, forwarded, a})
					}
				}
			})
		}
		if forwarded {
			wg.Go(func() { ownReads(bctx, s, start, func(a answer) { keep(&load.Own, a) }) })
		}
	}
	wg.Wait()
	after, err := scrapeEach(ctx, all)
	if err != nil {
		return nil, err
	}
	for _, s := range all {
		// Never incremented since the apiserver started is unmoved.
		moved, err := metrics.Delta(before[s.Name], after[s.Name], rerouted, nil)
		if err != nil && !errors.Is(err, metrics.ErrNotExported) {
			return nil, err
		}
		load.Rerouted[s.Name] = moved
	}
	return load, nil
}

// ownReads is the entry's own reader: what s serves itself, every
// ownEvery until ctx ends (paced by that alone: client-go's default limit
// of 5 a second would hold it back).
func ownReads(ctx context.Context, s Server, start time.Time, keep func(answer)) {
	cfg := rest.CopyConfig(s.Config)
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		keep(answer{s.Name, false, Attempt{Message: err.Error()}})
		return
	}
	tick := time.NewTicker(ownEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a := Try(start, func() error { _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); return err })
		if ctx.Err() == nil {
			keep(answer{s.Name, false, a})
		}
	}
}

// loadAccount makes the service account the burst lists as, allowed to
// list the window's resource, and returns a client config of it for any
// server (no client-side rate limit: the burst is the point) and what
// removes it all; it waits until every server allows the list.
func loadAccount(ctx context.Context, w *Window) (func(Server) *rest.Config, func(), error) {
	admin, err := w.Old[0].client()
	if err != nil {
		return nil, nil, err
	}
	const name = "skewer-certify-load"
	cleanup := func() {
		bg := context.WithoutCancel(ctx)
		_ = admin.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
		_ = admin.CoreV1().Namespaces().Delete(bg, loadNamespace, metav1.DeleteOptions{})
	}
	token, err := grantList(ctx, admin, w.Resource, name)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	cfg := func(s Server) *rest.Config {
		c := rest.AnonymousClientConfig(s.Config)
		c.BearerToken, c.QPS, c.Burst = token, -1, 0
		return c
	}
	for _, s := range w.all() {
		api, err := w.api(Server{Name: s.Name, Config: cfg(s)}, loadNamespace)
		if err == nil {
			err = wait.For(ctx, "certify/rbac-reaches-servers", "the burst's service account to list "+w.Resource.Key()+" through "+s.Name,
				func(ctx context.Context) (bool, string, error) {
					_, err := api.List(ctx, metav1.ListOptions{Limit: 1})
					if err != nil {
						return false, err.Error(), nil
					}
					return true, "", nil
				})
		}
		if err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	return cfg, cleanup, nil
}

// grantList makes loadNamespace, its service account "load", and a
// ClusterRole and binding named name that let it get and list r; it
// returns a token of the account.
func grantList(ctx context.Context, admin kubernetes.Interface, r discovery.Resource, name string) (string, error) {
	made := func(_ any, err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	err := made(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: loadNamespace}}, metav1.CreateOptions{}))
	if err == nil {
		err = made(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}))
	}
	if err == nil {
		err = made(admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: loadNamespace, Name: "load"}}}, metav1.CreateOptions{}))
	}
	if err != nil {
		return "", err
	}
	return serviceAccountToken(ctx, admin, loadNamespace, "load")
}

// judgeLoad judges proxy.load.concurrent on a burst: forwarded requests
// met the objective (th) on LatencyFloor of them at least - at most the
// share failed, at most the bound added at p99 over the same list served
// where the resource lives; no newer apiserver forwarded anything (a
// forwarded request sent back would loop); the entries' own reads
// unharmed: none failed, p99 within ownP99, on a floor of their own.
func judgeLoad(l *Load, th promise.GuardThresholds) promise.Verdict {
	const id = "proxy.load.concurrent"
	t := l.tally()
	switch {
	case t.forwarded < guard.LatencyFloor || len(t.local) < guard.LatencyFloor:
		return promise.Errored(id, "%d forwarded and %d answered local lists in the burst (%d throttled): the objective is judged on %d of each at least",
			t.forwarded, len(t.local), t.throttled, guard.LatencyFloor)
	case len(l.Own) < int(loadFor/ownEvery)/2:
		return promise.Errored(id, "%d of the entries' own reads in %s: too few to say they were unharmed", len(l.Own), loadFor)
	}
	pf, pl, po := traffic.Percentile(t.fwd, 0.99), traffic.Percentile(t.local, 0.99), traffic.Percentile(t.own, 0.99)
	ev := []string{fmt.Sprintf("%d clients on each of %d apiservers for %s: %d forwarded lists, %d failed (at most %g%%), %d throttled (429); p99 %s forwarded, %s local: %s (at most +%s)",
		loadClients, len(l.Rerouted), loadFor, t.forwarded, t.failed, 100*th.MaxForwardedFailures, t.throttled, ms(pf), ms(pl), signed(pf-pl), th.MaxForwardedAddedP99),
		fmt.Sprintf("the entries' own reads: %d, %d failed%s, p99 %s (at most %s)", len(l.Own), t.ownFailed, t.firstOwn, ms(po), ownP99),
		fmt.Sprintf("rerouted counters moved: %v", l.Rerouted)}
	fail := func(format string, args ...any) promise.Verdict {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case float64(t.failed)/float64(t.forwarded) > th.MaxForwardedFailures:
		return fail("%d of %d forwarded lists failed under load, over the objective's %g%%", t.failed, t.forwarded, 100*th.MaxForwardedFailures)
	case pf-pl > th.MaxForwardedAddedP99.Duration:
		return fail("forwarding added %s at p99 under load, over %s", ms(pf-pl), th.MaxForwardedAddedP99)
	case t.ownFailed > 0 || po > ownP99:
		return fail("the entries' own reads were harmed by the burst: %d failed%s, p99 %s (at most %s)", t.ownFailed, t.firstOwn, ms(po), ownP99)
	}
	for _, s := range l.Newer {
		if l.Rerouted[s] > 0 {
			return fail("%s, which serves the resource, forwarded %g request(s) during the burst: sent back, a loop", s, l.Rerouted[s])
		}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

// tally is a burst's answers counted: the latencies of the answered
// forwarded, local and own requests, how many forwarded there were and
// how many failed, how many the burst had throttled, and the own reads
// that failed - the first said.
type loadTally struct {
	fwd, local, own                         []time.Duration
	forwarded, failed, throttled, ownFailed int
	firstOwn                                string
}

func (l *Load) tally() loadTally {
	var t loadTally
	for _, a := range l.Burst {
		switch {
		case a.Code == 429:
			t.throttled++
		case a.forwarded && a.failed():
			t.forwarded++
			t.failed++
		case a.forwarded:
			t.forwarded++
			t.fwd = append(t.fwd, a.Took)
		case !a.failed():
			t.local = append(t.local, a.Took)
		}
	}
	// An own read throttled (429) was harmed too: the burst was to be
	// kept apart from it.
	for _, a := range l.Own {
		if !a.failed() {
			t.own = append(t.own, a.Took)
		} else if t.ownFailed++; t.ownFailed == 1 {
			t.firstOwn = fmt.Sprintf(" (the first, at %s: %d %s)", a.server, a.Code, a.Message)
		}
	}
	return t
}

// signed is d to the millisecond with its sign: what forwarding added,
// or took away.
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + ms(d).String()
	}
	return ms(d).String()
}

// ms rounds d to the millisecond, for evidence.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// scrapeEach scrapes every one of servers' /metrics, by name.
func scrapeEach(ctx context.Context, servers []Server) (map[string]metrics.Snapshot, error) {
	out := map[string]metrics.Snapshot{}
	for _, s := range servers {
		snap, err := scrape(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", s.Name, err)
		}
		out[s.Name] = snap
	}
	return out, nil
}
