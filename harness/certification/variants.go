package certification

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// SwitchPromises are the promises CheckGateSwitch judges.
var SwitchPromises = []promise.ID{"proxy.route.baseline-false-404", "proxy.rollback.gate-off"}

// CheckGateSwitch turns the proxy off on the window's first older
// apiserver, then on again:
//   - proxy.route.baseline-false-404: restarted with the proxy's gate off
//     (its other feature gates kept) and without --peer-ca-file (which a
//     1.35 server refuses to start with while the gate is off), it
//     reports the gate off
//     (kubernetes_feature_enabled 0) and answers the window's resource
//     404, serving the request itself (no peer logs it), while its newer
//     peer serves the resource: the false 404 the proxy exists to prevent.
//   - proxy.rollback.gate-off: with its flags as they were, it forwards
//     again; how long after its restart is measured.
func CheckGateSwitch(ctx context.Context, c *cluster.Cluster, w *Window) []promise.Verdict {
	baseID, offID := SwitchPromises[0], SwitchPromises[1]
	failBoth := func(format string, args ...any) []promise.Verdict {
		return []promise.Verdict{fail(baseID, format, args...), fail(offID, format, args...)}
	}
	old, peer := w.Old[0], w.New[0]
	node, err := c.Node(ctx, old.Name)
	if err != nil {
		return failBoth("%v", err)
	}
	off := &faults.APIServerFlags{Node: node, Items: map[string]string{"feature-gates": proxyGate + "=false"}, Remove: []string{"peer-ca-file"}}
	var base promise.Verdict
	if err := withFault(ctx, c, w, off, func() error {
		peerAPI, err := w.api(peer, "default")
		if err != nil {
			return err
		}
		if _, err := peerAPI.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("%s (%s) does not serve %s itself: %w", peer.Name, peer.Version, w.Resource.Key(), err)
		}
		ids := &auditIDs{}
		api, err := w.api(old, "default", ids)
		if err != nil {
			return err
		}
		_, lerr := api.List(ctx, metav1.ListOptions{Limit: 1})
		on, err := featureEnabled(ctx, old, proxyGate)
		if err != nil {
			return err
		}
		said := fmt.Sprintf("%s (%s) restarted with %s=false and no --peer-ca-file (kubernetes_feature_enabled %g): list %s answered %v, audit ID %s, while %s serves it",
			old.Name, old.Version, proxyGate, on, w.Resource.Key(), orOK(lerr), ids.last(), peer.Name)
		base = baselineVerdict(said, on, lerr, func() error {
			return notForwarded(ctx, c, old, slices.Concat(w.Old[1:], w.New), ids.all())
		})
		return nil
	}); err != nil {
		return failBoth("%v", err)
	}
	took, err := w.RouteWorks(ctx, "default")
	return []promise.Verdict{base, gateOnAgain(old.Name, w.Resource.Key(), took, err)}
}

// baselineVerdict judges proxy.route.baseline-false-404 on what the entry
// restarted with the proxy off said (said): the gate as it reports it
// (on) and how it answered the list (lerr); servedAlone checks, once the
// 404 came, that no other apiserver logged the request.
func baselineVerdict(said string, on float64, lerr error, servedAlone func() error) promise.Verdict {
	const id = "proxy.route.baseline-false-404"
	switch {
	case on != 0:
		return fail(id, "%s: the gate is still on", said)
	case !apierrors.IsNotFound(lerr):
		return fail(id, "%s, not the false 404 of a server with no proxy", said)
	}
	if err := servedAlone(); err != nil {
		return fail(id, "%s; %v", said, err)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{said + "; no other apiserver logged it"}}
}

// gateOnAgain judges proxy.rollback.gate-off on whether entry, with its
// flags as before, routed key again (err from RouteWorks), took after its
// restart.
func gateOnAgain(entry, key string, took time.Duration, err error) promise.Verdict {
	const id = "proxy.rollback.gate-off"
	if err != nil {
		return fail(id, "with the proxy on again: %v", err)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{fmt.Sprintf(
		"%s with its flags as before forwards %s again %s after its restart", entry, key, took.Round(100*time.Millisecond))}}
}

// featureEnabled is kubernetes_feature_enabled{name=gate} on s.
func featureEnabled(ctx context.Context, s Server, gate string) (float64, error) {
	snap, err := scrape(ctx, s)
	if err != nil {
		return 0, err
	}
	if _, ok := snap["kubernetes_feature_enabled"]; !ok {
		return 0, fmt.Errorf("%s exports no kubernetes_feature_enabled", s.Name)
	}
	return snap.Sum("kubernetes_feature_enabled", map[string]string{"name": gate}), nil
}

// VariantPromises are the promises CheckRuntimeConfig judges first-hand;
// it adds evidence to proxy.metrics.rerouted and the proxy.audit promises.
var VariantPromises = []promise.ID{"proxy.route.runtime-config", "proxy.metrics.peer-proxy-errors", "proxy.defaults.beta"}

// variantGroupVersion is what the runtime-config variant turns off on one
// apiserver: node.k8s.io/v1 (RuntimeClass), GA since v1.20 and the only
// version of its group, so that server is left without the resource while
// every other still serves it, whatever the pair. Nothing in a kind
// cluster keeps a RuntimeClass.
const variantGroupVersion = "node.k8s.io/v1"

// CauseTransportUncounted is why apiserver_peer_proxy_errors_total does
// not move for a forwarded request that fails at the transport: the
// handler counts only an endpoint it cannot resolve and a round tripper
// it cannot build.
const CauseTransportUncounted = "transport-error-uncounted"

// CheckRuntimeConfig is the deterministic routing variant: it needs no
// resource only one version serves, so a pair with none gets it too. The
// window's first newer apiserver (the entry) is restarted with
// --runtime-config=node.k8s.io/v1=false; its local discovery must lack
// runtimeclasses, and every other apiserver, serving them, is its capable
// peer. Through the entry alone:
//   - proxy.route.runtime-config: every verb and the watch, as
//     CheckRouteVerbs routes them, with the audit trail (CheckAudit) and
//     the rerouted count (CheckRerouted) of the same requests;
//   - proxy.metrics.peer-proxy-errors, where the entry counts it: every link
//     from the entry to a capable peer slowed past the proxy's TLS
//     handshake timeout, a list is an explicit 503 within slowAboveBound
//     and the counter must move (upstream counts no transport error: a
//     failure with CauseTransportUncounted);
//   - proxy.defaults.beta (CheckBetaDefault): the entry, of the newer
//     version, proxies on the gate's default and not without
//     --peer-ca-file - in a pair from 1.35 the only server that can show
//     it, since the older ones need the gate set; it leaves the entry
//     without --peer-ca-file, last, for the revert below.
//
// The links are put back as each check ends, the entry's manifest (both
// flags) by one restart before it returns.
func CheckRuntimeConfig(ctx context.Context, c *cluster.Cluster, w *Window) []promise.Verdict {
	failAll := func(format string, args ...any) []promise.Verdict {
		var out []promise.Verdict
		for _, id := range VariantPromises {
			out = append(out, fail(id, format, args...))
		}
		return out
	}
	entry := w.New[0]
	var peers []Server
	for _, s := range slices.Concat(w.Old, w.New) {
		if s.Name != entry.Name {
			peers = append(peers, s)
		}
	}
	node, err := c.Node(ctx, entry.Name)
	if err != nil {
		return failAll("%v", err)
	}
	off := &faults.APIServerFlags{Node: node, Items: map[string]string{"runtime-config": variantGroupVersion + "=false"}}
	var out []promise.Verdict
	if err := injected(ctx, c, off, func() error {
		rw, err := variantWindow(ctx, entry, peers)
		if err != nil {
			return err
		}
		took, err := rw.RouteWorks(ctx, "default")
		if err != nil {
			return err
		}
		ids := &auditIDs{}
		route := runtimeConfigRoute(CheckRouteVerbs(ctx, rw, "default", ids), entry, took)
		out = append(out, route, CheckRerouted(ctx, rw, "default", 4))
		out = append(out, CheckAudit(ctx, c, rw, ids.all())...)
		out = append(out, transportErrorsCounted(ctx, c, rw), CheckBetaDefault(ctx, c, rw))
		return nil
	}); err != nil {
		return failAll("%v", err)
	}
	return out
}

// runtimeConfigRoute is proxy.route.runtime-config: the routing check's
// verdict through entry, restarted with variantGroupVersion off, whose
// route worked took after its restart.
func runtimeConfigRoute(route promise.Verdict, entry Server, took time.Duration) promise.Verdict {
	route.ID = VariantPromises[0]
	route.Evidence = append([]string{fmt.Sprintf("%s off on %s (%s) by --runtime-config; served through it by forwarding %s after its restart",
		variantGroupVersion, entry.Name, entry.Version, took.Round(100*time.Millisecond))}, route.Evidence...)
	return route
}

// variantWindow is the window the variant makes: entry lacking
// variantGroupVersion's resource in its local discovery, the peers serving
// it in theirs.
func variantWindow(ctx context.Context, entry Server, peers []Server) (*Window, error) {
	own, err := entry.local(ctx)
	if err != nil {
		return nil, err
	}
	var served []string
	for key := range own {
		if strings.HasPrefix(key, variantGroupVersion+"/") {
			served = append(served, key)
		}
	}
	if len(served) > 0 {
		slices.Sort(served)
		return nil, fmt.Errorf("%s still serves %v itself with %s turned off", entry.Name, served, variantGroupVersion)
	}
	theirs, err := peers[0].local(ctx)
	if err != nil {
		return nil, err
	}
	r, ok := theirs[variantGroupVersion+"/runtimeclasses"]
	if !ok {
		return nil, fmt.Errorf("%s does not serve %s/runtimeclasses", peers[0].Name, variantGroupVersion)
	}
	return &Window{Old: []Server{entry}, New: peers, Resource: r}, nil
}

// transportErrorsCounted judges proxy.metrics.peer-proxy-errors in the
// variant's window w: every link from its entry to a capable peer slowed
// past the TLS handshake timeout, a list through the entry must be an
// explicit 503 within slowAboveBound, and the entry's
// apiserver_peer_proxy_errors_total must move.
func transportErrorsCounted(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.metrics.peer-proxy-errors"
	entry := w.Old[0]
	if !countsPeerProxyErrors(entry.Version) {
		return promise.Inapplicable(id, "%s (%s) has no %s: the proxy's handler counts it since v1.36", entry.Name, entry.Version, peerProxyErrors)
	}
	from, err := c.Node(ctx, entry.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	var slow faults.All
	for _, p := range w.New {
		to, err := c.Node(ctx, p.Name)
		if err != nil {
			return fail(id, "%v", err)
		}
		slow = append(slow, &faults.SlowLink{From: from, To: to, Delay: 6 * time.Second})
	}
	api, err := w.api(entry.WithTimeout(slowAboveBound+10*time.Second), "default")
	if err != nil {
		return fail(id, "%v", err)
	}
	var a Attempt
	var before, after metrics.Snapshot
	if err := injected(ctx, c, slow, func() (err error) {
		if before, err = scrape(ctx, entry); err != nil {
			return err
		}
		a = Try(time.Now(), func() error { _, err := api.List(ctx, metav1.ListOptions{Limit: 1}); return err })
		after, err = scrape(ctx, entry)
		return err
	}); err != nil {
		return fail(id, "%v", err)
	}
	moved503, _ := metrics.Delta(before, after, rerouted, map[string]string{"code": "503"})
	moved, derr := metrics.Delta(before, after, peerProxyErrors, nil)
	ev := fmt.Sprintf("every link %s -> a capable peer +6 s each way (past the 10 s TLS handshake timeout): list %s %s; %s{code=503} moved by %g, %s by %g (%v)",
		entry.Name, w.Resource.Key(), a, rerouted, moved503, peerProxyErrors, moved, orOK(derr))
	switch {
	case a.Code != 503 || a.Took > slowAboveBound:
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: []string{ev},
			Reason: fmt.Sprintf("with every capable peer past the TLS handshake timeout, %s answered %s, not an explicit 503 within %s", entry.Name, a, slowAboveBound)}
	case moved == 0:
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: []string{ev}, Causes: []string{CauseTransportUncounted},
			Reason: fmt.Sprintf("%s did not move (or is not exported) for a forwarded request that failed at the transport (503); it showed only as %s{code=\"503\"}", peerProxyErrors, rerouted)}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{ev}}
}
