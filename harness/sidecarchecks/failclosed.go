package sidecarchecks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// The guarded Pod: a security proxy as its native sidecar, in front of
// an app that listens on the Pod's loopback only. The proxy crashes once
// after forwardedBeforeCrash requests - after the client Pod was served
// through it, however late that Pod started - and the kubelet starts it
// again; started, it loads its configuration for guardedLoad and refuses
// to forward until then. Its outage, from the crash to ready again, is
// the kubelet's restart (0.4-1.4 s here, session 36) and guardedLoad: at
// clientEvery it holds some 30 attempts on each address.
const (
	guardedAppAddr       = "127.0.0.1:8081"
	guardedAppPort       = "8081"
	guardedLoad          = time.Second
	forwardedBeforeCrash = 20
	// outageEdge is left unjudged at each end of the outage: the proxy
	// records its crash just before it closes its server and its
	// readiness just after it starts forwarding, a file append apart, so
	// a request at either edge may be served rightly (make e2e met one
	// begun the moment the restarted proxy turned ready, session 36).
	outageEdge = 100 * time.Millisecond
	// recoveryBound bounds the time out of service a crash costs: from
	// the proxy's crash to the first request served through the Service
	// again. The kubelet sees the exit at its next relist (every 1 s) and
	// starts a container's first crash again at once (no back-off before
	// a second); the proxy loads for guardedLoad and answers /ready, which
	// the next readiness probe (every 1 s) finds. hungSlack is added once
	// for the runtime's restart of the container and once for the
	// kubelet's status write, the EndpointSlice update and the Service's
	// rules on the node, as for the hung helper.
	recoveryBound = time.Second + guardedLoad + time.Second + 2*hungSlack
)

// CheckFailClosed judges sidecar.failure.closed on every kubelet at once:
// while a security proxy in front of the app is down, no request reaches
// the app - not through the Service, not at the Pod's proxy port, and
// never at the app's own port - tried from a client Pod beside it.
func (s *Sidecars) CheckFailClosed(ctx context.Context) promise.Verdict {
	return s.onEachAtOnce(ctx, "sidecar.failure.closed", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		b := podBuilder{image: s.image, ns: ns, name: "guarded", node: k.Name}
		proxy := native(b.container(CrashingSidecar, "proxy", "-load-after", guardedLoad.String(), "-upstream", "http://"+guardedAppAddr,
			"-crash-after-requests", strconv.Itoa(forwardedBeforeCrash), "-crash-marker", "/shared/crashed"))
		proxy.ReadinessProbe = readyProbe()
		pod := b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("app", "app", "-serve", guardedAppAddr)})
		p, clusterIP, err := s.servedPod(ctx, pod)
		if err != nil {
			return nil, err
		}
		urls := ClosedURLs{Service: "http://" + clusterIP + ":8080/", Proxy: "http://" + p.Status.PodIP + ":8080/",
			App: "http://" + p.Status.PodIP + ":" + guardedAppPort + "/"}
		if err := s.runClient(ctx, ns, k.Name, urls.Service, urls.Proxy, urls.App); err != nil {
			return nil, err
		}
		ev, err := withClient(ctx, k.Node, ns, b.name)
		if err != nil {
			return nil, err
		}
		return judgeFailClosed(urls, ev)
	})
}

// ClosedURLs are the addresses the client Pod asks: the Service, the
// guarded Pod's proxy port, and its app's own port.
type ClosedURLs struct{ Service, Proxy, App string }

// proxyOutage is when the guarded Pod's proxy crashed and when it was
// ready again.
func proxyOutage(ev []fixtures.Event) (crash, back time.Time, err error) {
	crash, ok := fixtures.First(ev, CrashingSidecar, "crash")
	if !ok {
		return crash, back, unjudged("the proxy never crashed (it was to after %d forwarded requests): the outage was not seen: %s", forwardedBeforeCrash, eventLines(ev))
	}
	if back, ok := firstAfter(ev, CrashingSidecar, "ready", crash); ok {
		return crash, back, nil
	}
	return crash, back, fmt.Errorf("the proxy crashed at %s and was never ready again", crash.UTC().Format("15:04:05.000"))
}

// servedThroughProxy counts the requests the app served, each of which
// must have come through its proxy, and none while it was down (from
// crash to back).
func servedThroughProxy(ev []fixtures.Event, down func(time.Time) bool, crash, back time.Time) (int, error) {
	served := 0
	for _, e := range ev {
		if e.Who != "app" || !strings.HasPrefix(e.What, "request ") {
			continue
		}
		served++
		switch {
		case !strings.HasPrefix(e.What, "request via=proxy "):
			return 0, fmt.Errorf("the app served a request that did not come through its proxy: %s", e)
		case down(e.At):
			return 0, fmt.Errorf("the app served a request while its proxy was down (%s to %s): %s", crash.UTC().Format("15:04:05.000"), back.UTC().Format("15:04:05.000"), e)
		}
	}
	return served, nil
}

// recoveredWithin says whether the Service served again, first at
// recovered, within recoveryBound of the crash; tried is the last attempt
// the client began through it: one that stopped trying before the bound
// could not tell.
func recoveredWithin(crash, recovered, tried time.Time) error {
	switch {
	case recovered.IsZero() && tried.Sub(crash) < recoveryBound:
		return unjudged("the client's last attempt through the Service began %s after the proxy crashed, before the recovery's bound %s: the recovery was not seen",
			tried.Sub(crash).Round(time.Millisecond), recoveryBound)
	case recovered.IsZero():
		return fmt.Errorf("the Service never served the client again in the %s after the proxy crashed at %s: no recovery", tried.Sub(crash).Round(time.Millisecond), crash.UTC().Format("15:04:05.000"))
	case recovered.Sub(crash) > recoveryBound:
		return fmt.Errorf("the Service served the client again only %s after the proxy crashed, over the bound %s",
			recovered.Sub(crash).Round(time.Millisecond), recoveryBound)
	}
	return nil
}

// judgeFailClosed judges sidecar.failure.closed on one kubelet's events:
// the proxy crashed and was ready again; every request the app served
// came through the proxy, none while it was down (from the crash until
// ready again); every attempt the client began while the proxy was down
// failed, through the Service and at the
// Pod's proxy port; no attempt at the app's own port was ever served; the
// Service served again within recoveryBound of the crash.
// Floors: the client was served through the Service and the proxy port
// before the crash, and began an attempt on each address in the outage -
// without them nothing shows the path closed rather than never open.
func judgeFailClosed(urls ClosedURLs, ev []fixtures.Event) ([]string, error) {
	crash, back, err := proxyOutage(ev)
	if err != nil {
		return nil, err
	}
	down := func(t time.Time) bool { return !t.Before(crash.Add(outageEdge)) && t.Before(back.Add(-outageEdge)) }
	served, err := servedThroughProxy(ev, down, crash, back)
	if err != nil {
		return nil, err
	}
	type tally struct{ before, inOutage, servedAfter int }
	// The first attempt served through the Service after the outage, and
	// the last the client began through it.
	var recovered, tried time.Time
	seen := map[string]*tally{urls.Service: {}, urls.Proxy: {}, urls.App: {}}
	for _, a := range attempts(ev) {
		if a.url == urls.Service && a.began.After(tried) {
			tried = a.began
		}
		t := seen[a.url]
		switch {
		case t == nil:
			continue
		case a.ok && a.url == urls.App:
			return nil, fmt.Errorf("a client Pod reached the app at its own port %s, around its proxy (attempt begun %s)", a.url, a.began.UTC().Format("15:04:05.000"))
		case a.ok && down(a.began):
			return nil, fmt.Errorf("%s served an attempt begun %s, while the proxy was down (%s to %s)", a.url, a.began.UTC().Format("15:04:05.000"), crash.UTC().Format("15:04:05.000"), back.UTC().Format("15:04:05.000"))
		case down(a.began):
			t.inOutage++
		case a.ok && a.began.Before(crash):
			t.before++
		case a.ok:
			t.servedAfter++
			if a.url == urls.Service && (recovered.IsZero() || a.began.Before(recovered)) {
				recovered = a.began
			}
		}
	}
	named := []struct{ name, url string }{{"the Service", urls.Service}, {"the Pod's proxy port", urls.Proxy}, {"the app's port", urls.App}}
	for _, n := range named[:2] {
		if seen[n.url].before == 0 {
			return nil, unjudged("the client was never served through %s (%s) before the crash: a closed path cannot be told from one never open", n.name, n.url)
		}
	}
	for _, n := range named {
		if seen[n.url].inOutage == 0 {
			return nil, unjudged("the client began no attempt at %s (%s) in the proxy's %s outage: it cannot be judged", n.name, n.url, back.Sub(crash).Round(time.Millisecond))
		}
	}
	if err := recoveredWithin(crash, recovered, tried); err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("the proxy crashed after %d forwarded requests and was down %s until ready again; in that outage %d attempts through the Service, %d at the Pod's proxy port and %d at the app's own port all failed, and the app's port refused the client throughout; the app served %d requests, every one through its proxy; served through the Service again %s after the crash (bound %s), %d times",
		forwardedBeforeCrash, back.Sub(crash).Round(time.Millisecond), seen[urls.Service].inOutage, seen[urls.Proxy].inOutage, seen[urls.App].inOutage, served,
		recovered.Sub(crash).Round(time.Millisecond), recoveryBound, seen[urls.Service].servedAfter)}, nil
}
