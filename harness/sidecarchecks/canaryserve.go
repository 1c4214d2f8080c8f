package sidecarchecks

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// canaryServe asks every canary Pod, through the API server's proxy to
// its proxy's port, every canaryEvery for canaryServe, all at once, and
// on until each Pod was asked its share of canaryMinRequests (for three
// times canaryServe at most): a loaded machine answers fewer in the
// window - 93 of a template's 160 in a soak run with unit tests beside
// it - and a floor met by asking longer is a sample, not a timeout. It
// counts each template's requests and errors, and watches readiness as
// long as it asks. It asks with a client of its own, limited to the rate
// it needs: the checks' shared client's (client-go's default, 5 a second)
// would let through a fifth of them.
func (s *Sidecars) canaryServe(ctx context.Context, ns string, pods [2][]string, seen *CanarySeen) error {
	cfg, err := s.c.RESTConfig()
	if err != nil {
		return err
	}
	cfg.QPS = float32(seen.Pods*len(templateNames)) * float32(time.Second/canaryEvery)
	cfg.Burst = int(cfg.QPS)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	window := askWindow{end: time.Now().Add(canaryServe), last: time.Now().Add(3 * canaryServe), atLeast: (canaryMinRequests + seen.Pods - 1) / seen.Pods}
	of := map[string]int{}
	for t := range templateNames {
		for _, name := range pods[t] {
			of[name] = t
			wg.Add(1)
			go func() {
				defer wg.Done()
				asked, failed := askThroughProxy(ctx, cs, ns, name, window)
				mu.Lock()
				seen.Templates[t].Requests += asked
				seen.Templates[t].Errors += failed
				mu.Unlock()
			}()
		}
	}
	asking := make(chan struct{})
	go func() { wg.Wait(); close(asking) }()
	lost, looks := readinessLost(ctx, cs, ns, of, asking)
	seen.ReadinessLooks = looks
	for t := range templateNames {
		seen.Templates[t].ReadinessLost = lost[t]
	}
	return nil
}

// askWindow is how long a canary Pod is asked: until end, and on until
// it was asked atLeast times, never past last.
type askWindow struct {
	end, last time.Time
	atLeast   int
}

// more says whether a Pod asked asked times so far is asked again now.
func (w askWindow) more(asked int, now time.Time) bool {
	return now.Before(w.last) && (now.Before(w.end) || asked < w.atLeast)
}

// askThroughProxy asks the Pod name at its proxy's port every canaryEvery
// while w says so, and says how many times it asked and how many failed.
func askThroughProxy(ctx context.Context, cs kubernetes.Interface, ns, name string, w askWindow) (asked, failed int) {
	tick := time.NewTicker(canaryEvery)
	defer tick.Stop()
	for w.more(asked, time.Now()) && ctx.Err() == nil {
		if _, err := cs.CoreV1().Pods(ns).ProxyGet("http", name, "8080", "/", nil).DoRaw(ctx); err != nil {
			failed++
		}
		asked++
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return asked, failed
}

// readinessLost looks at the canary's Pods (of: each one's template)
// every canaryEvery until asking is closed, and counts by template the
// times one that was Ready was not: out of service after it served. A
// probe that fails
// before a Pod's first Ready (the kubelet's Unhealthy events count those
// too) keeps nothing out of service that was in it.
func readinessLost(ctx context.Context, cs kubernetes.Interface, ns string, of map[string]int, asking <-chan struct{}) (lost [2]int32, looks Looks) {
	was := map[string]bool{}
	tick := time.NewTicker(canaryEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		looks.Tried++
		if list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "template"}); err == nil {
			looks.Seen++
			for _, p := range list.Items {
				t, ok := of[p.Name]
				if !ok {
					continue
				}
				ready := podReady(&p)
				if was[p.Name] && !ready {
					lost[t]++
				}
				was[p.Name] = ready
			}
		}
		select {
		case <-ctx.Done():
		case <-asking:
			return lost, looks
		case <-tick.C:
		}
	}
	return lost, looks
}

// Looks counts the looks at the canary's Pods' readiness: tried, and
// those the API answered.
type Looks struct{ Tried, Seen int }
