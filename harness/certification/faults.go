package certification

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/traffic"
	"github.com/skewer-k8s/skewer/harness/version"
)

const peerProxyErrors = "apiserver_peer_proxy_errors_total"

// FaultPromises are the promises CheckPeerKilled judges.
var FaultPromises = []promise.ID{"proxy.fault.peer-killed", "proxy.metrics.peer-proxy-errors"}

// countsPeerProxyErrors says whether an apiserver of v counts
// apiserver_peer_proxy_errors_total: the proxy's handler has it since
// k8s.io/apiserver v0.36 (pkg/util/peerproxy/metrics/metrics.go), not in
// v0.35. Absent from a scrape until its first increment, it cannot be
// found by asking the server.
func countsPeerProxyErrors(v version.Version) bool { return v.Major() > 1 || v.Minor() >= 36 }

// Bounds of the peer-killed fault.
const (
	// answerBound is the longest a request may take while the capable
	// peer is dead: the proxy's TLS handshake timeout, the longest wait it
	// has short of the request timeout. A dead peer's port refuses at once.
	answerBound = 10 * time.Second
	// addressTTL is how long a killed apiserver's address record stays in
	// etcd (/peerserverleases/<id>, TTL 15 s, renewed every 10 s):
	// kubernetes pkg/controlplane/apiserver/peer.go. Until it expires old
	// servers may still pick the dead peer.
	addressTTL = 15 * time.Second
)

// CheckPeerKilled judges proxy.fault.peer-killed: the first newer apiserver
// of the window is killed (faults.KillAPIServer: SIGKILL, nothing
// restarts it, its identity Lease and address record left behind) and the
// window's resource is asked for through the first older one.
//   - With no other capable peer, every request is answered, within
//     answerBound, with 503: never a 404 (the resource does exist), never
//     a hang. Where the older server counts apiserver_peer_proxy_errors_total,
//     it moves for the dead peer's address, which stops resolving once its
//     record expires (proxy.metrics.peer-proxy-errors).
//   - With another capable peer, no request answers 404 or hangs, and once
//     the dead peer's address record has expired every request is served:
//     how long that took is measured.
//
// The apiserver is started again before it returns, whatever happened.
func CheckPeerKilled(ctx context.Context, c *cluster.Cluster, w *Window) []promise.Verdict {
	id, metricID := FaultPromises[0], FaultPromises[1]
	old, dead := w.Old[0], w.New[0]
	alone := len(w.New) == 1
	failBoth := func(format string, args ...any) []promise.Verdict {
		return []promise.Verdict{fail(id, format, args...), fail(metricID, format, args...)}
	}
	if _, err := w.RouteWorks(ctx, "default"); err != nil {
		return failBoth("%v", err)
	}
	node, err := c.Node(ctx, dead.Name)
	if err != nil {
		return failBoth("%v", err)
	}
	before, err := scrape(ctx, old)
	if err != nil {
		return failBoth("%v", err)
	}
	deadID, err := identityLease(ctx, c, dead.Name)
	if err != nil {
		return failBoth("%v", err)
	}
	killed := time.Now()
	kill := &faults.KillAPIServer{Node: node}
	defer func() {
		// Reverted on every path, Ctrl-C too: a cluster with a dead
		// apiserver is no place for the checks after this one.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		_ = kill.Revert(rctx, c)
	}()
	if err := kill.Inject(ctx, c); err != nil {
		return failBoth("%v", err)
	}
	d := addressTTL + 10*time.Second
	if !alone {
		d = addressTTL + 15*time.Second
	}
	as, err := w.Probe(ctx, old, d, 500*time.Millisecond, 30*time.Second)
	if err != nil {
		return failBoth("probing through %s with %s dead: %v", old.Name, dead.Name, err)
	}
	after, serr := scrape(ctx, old)
	ev := []string{fmt.Sprintf("%s: %s through %s for %s: %v; %s", kill.Name(), w.Resource.Key(), old.Name, d, Codes(as), strings.Join(messages(as), ", "))}

	// The old server drops a peer from its cache when a rebuild cannot
	// fetch the peer's discovery; its own log says when that happened.
	rebuilt, rebuiltAt, lerr := rebuiltWithout(ctx, c, old.Name, deadID, killed)
	if lerr != nil {
		ev = append(ev, lerr.Error())
	} else if rebuilt != "" {
		ev = append(ev, fmt.Sprintf("%s rebuilt its peer cache without %s (%s) at %s: %s", old.Name, dead.Name, deadID, rebuiltAt.Format("15:04:05.000"), rebuilt))
	}
	v, lastFailed := killedVerdict(old.Name, dead.Name, as, alone, rebuiltAt, ev)
	if !alone {
		v.Evidence = append(v.Evidence, fmt.Sprintf("%s served every request from +%s on (the last that was not served)", w.New[1].Name, lastFailed.Round(100*time.Millisecond)))
		return []promise.Verdict{v}
	}
	return []promise.Verdict{v, peerProxyErrorsMoved(old, before, after, serr)}
}

// CausePeerCacheRebuilt is the cause of a false 404 from an old apiserver
// that rebuilt its peer-discovery cache while a capable peer was
// unreachable: the rebuild leaves out a peer whose discovery it cannot
// fetch, and with no capable peer left the request falls through to the
// local handler.
const CausePeerCacheRebuilt = traffic.CausePeerCacheRebuilt

// killedVerdict judges proxy.fault.peer-killed on the attempts made
// through entry with dead killed (judgeKilled), ev being what was seen;
// it also says when the last one that was not served began.
func killedVerdict(entry, dead string, as []Attempt, alone bool, rebuilt time.Time, ev []string) (promise.Verdict, time.Duration) {
	const id = "proxy.fault.peer-killed"
	if v := underFault(id, "requests through "+entry+" with "+dead+" killed", len(as)); v != nil {
		return *v, 0
	}
	if !alone {
		late := 0
		for _, a := range as {
			if a.At > addressTTL+5*time.Second {
				late++
			}
		}
		if v := underFault(id, fmt.Sprintf("requests through %s later than %s after the kill (another capable peer serves by then)", entry, addressTTL+5*time.Second), late); v != nil {
			return *v, 0
		}
	}
	bad, causes, lastFailed := judgeKilled(as, alone, rebuilt)
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Causes: causes,
			Reason: fmt.Sprintf("%d of %d requests through %s with %s killed: %s", len(bad), len(as), entry, dead, strings.Join(bad[:min(3, len(bad))], "; "))}, lastFailed
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}, lastFailed
}

// judgeKilled says which of the attempts made with a capable peer killed
// break proxy.fault.peer-killed - alone, when it was the only capable peer -
// with the cause of each (a 404 answered after the entry server logged
// the rebuild of its peer cache without the dead peer, at rebuilt, is
// CausePeerCacheRebuilt; one before it, or with none logged, is
// unknown), and when the last one that was not served began.
func judgeKilled(as []Attempt, alone bool, rebuilt time.Time) (bad, causes []string, lastFailed time.Duration) {
	for _, a := range as {
		cause := promise.UnknownCause
		switch {
		case a.Code == 0 || a.Took > answerBound:
			bad = append(bad, "no answer within "+answerBound.String()+": "+a.String())
		case a.Code == 404:
			bad = append(bad, "a false 404: "+a.String())
			if after(a, rebuilt) {
				cause = CausePeerCacheRebuilt
			}
		case alone && a.Code != 503:
			bad = append(bad, "not an explicit 503 with nothing to serve it: "+a.String())
		case !alone && a.Code != 200 && a.At > addressTTL+5*time.Second:
			bad = append(bad, fmt.Sprintf("not served %s after the kill, with another capable peer serving: %s", a.At.Round(time.Second), a))
		default:
			cause = ""
		}
		if cause != "" {
			causes = append(causes, cause)
		}
		if a.Code != 200 {
			lastFailed = a.At
		}
	}
	return bad, causes, lastFailed
}

// identityLease is the name of the identity Lease of node's apiserver:
// its server ID.
func identityLease(ctx context.Context, c *cluster.Cluster, node string) (string, error) {
	cs, err := c.Client()
	if err != nil {
		return "", err
	}
	l, err := cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver,kubernetes.io/hostname=" + node})
	if err != nil {
		return "", err
	}
	if len(l.Items) != 1 {
		return "", fmt.Errorf("%d apiserver identity Leases name %s as their host, want 1", len(l.Items), node)
	}
	return l.Items[0].Name, nil
}

// notFoundCauses is the cause of each 404 among as: cause for one
// answered after at, the moment its evidence was seen (a rebuild logged,
// a Lease gone), unknown for one before it or with nothing seen.
func notFoundCauses(as []Attempt, at time.Time, cause string) []string {
	var out []string
	for _, a := range as {
		if a.Code != 404 {
			continue
		}
		if after(a, at) {
			out = append(out, cause)
		} else {
			out = append(out, promise.UnknownCause)
		}
	}
	return out
}

// after says whether the attempt was answered after at, a moment a log
// line recorded; never when at is zero (nothing was logged).
func after(a Attempt, at time.Time) bool {
	return !at.IsZero() && !a.Sent.IsZero() && !a.Sent.Add(a.Took).Before(at)
}

// rebuiltWithout is the first line node's apiserver logged since since
// saying a rebuild of its peer cache could not fetch the discovery of peer
// id - its address (failed to get host port info) or its /api and /apis
// (error querying discovery endpoint) - and so left the peer out, with
// the moment the runtime recorded it; "" when there is none. The log is
// read through the API (the static Pod's mirror), which gives stderr,
// where the apiserver writes, as well as stdout.
func rebuiltWithout(ctx context.Context, c *cluster.Cluster, node, id string, since time.Time) (string, time.Time, error) {
	cs, err := c.Client()
	if err != nil {
		return "", time.Time{}, err
	}
	st := metav1.NewTime(since)
	logs, err := cs.CoreV1().Pods("kube-system").GetLogs("kube-apiserver-"+node, &corev1.PodLogOptions{SinceTime: &st, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("the apiserver log of %s: %w", node, err)
	}
	line, at := firstRebuildWithout(string(logs), id)
	return line, at, nil
}

// firstRebuildWithout finds, in an apiserver log whose lines begin with
// the runtime's RFC 3339 timestamp, the first rebuild that left out peer
// id, and when it was logged.
func firstRebuildWithout(logs, id string) (string, time.Time) {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, id) && (strings.Contains(line, "error querying discovery endpoint for serverID") ||
			strings.Contains(line, "failed to get host port info from identity lease for server "+id)) {
			stamp, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil {
				continue // no time, no order: not evidence of one
			}
			return strings.TrimSpace(rest), at
		}
	}
	return "", time.Time{}
}

// peerProxyErrorsMoved judges proxy.metrics.peer-proxy-errors on old's
// scrapes around the peer-killed fault with no other capable peer: once
// the dead peer's address record expired, every request failed to resolve
// it (type endpoint_resolution).
func peerProxyErrorsMoved(old Server, before, after metrics.Snapshot, scrapeErr error) promise.Verdict {
	const id = "proxy.metrics.peer-proxy-errors"
	if !countsPeerProxyErrors(old.Version) {
		return promise.Inapplicable(id, "the older apiservers (%s) have no %s: the proxy's handler counts it since v1.36", old.Version, peerProxyErrors)
	}
	if scrapeErr != nil {
		return fail(id, "scrape of %s after the fault: %v", old.Name, scrapeErr)
	}
	match := map[string]string{"type": "endpoint_resolution"}
	moved, err := metrics.Delta(before, after, peerProxyErrors, match)
	if err != nil {
		return fail(id, "on %s, with its only capable peer dead past its address record: %v", old.Name, err)
	}
	series := after.Series(peerProxyErrors)
	sort.Strings(series)
	ev := fmt.Sprintf("%s{type=endpoint_resolution} on %s moved by %g; series after: %v", peerProxyErrors, old.Name, moved, series)
	if moved == 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: []string{ev},
			Reason: fmt.Sprintf("%s{type=endpoint_resolution} on %s did not move while its only capable peer's address could not be resolved", peerProxyErrors, old.Name)}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{ev}}
}
