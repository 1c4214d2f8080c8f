package restarts

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// CauseStuckOnOneAPIServer is why a node left Ready when its kubelet's
// requests in the minutes before all went to one apiserver, which failed
// every one of them (5xx: it timed out reaching its storage), while the
// other apiservers served: the kubelet's connection through the load
// balancer stays on the apiserver it has, and an apiserver whose storage
// is gone (kubeadm points each at its own node's etcd member only, and
// upgrades that member while the apiserver serves) still answers the load
// balancer's health check long enough to keep it. The node's lease is not
// renewed for the node monitor's grace period, and the node goes
// NotReady.
const CauseStuckOnOneAPIServer = "stuck-on-one-apiserver"

// beforeNotReady is how far back a node's kubelet's requests are read to
// explain why it left Ready: the node monitor's grace period (50 s since
// v1.32) and the lease's duration (40 s) with room to spare.
const beforeNotReady = 2 * time.Minute

// StayReady judges cluster.nodes-stay-ready on the events a run saw: a
// node leaving Ready that a step meant (the node it acted on) is
// evidence, any other fails the promise, each with its cause read from
// the audit logs at auditLogs (every apiserver the cluster has had): why
// the node's kubelet could not renew its lease.
func StayReady(seen []Event, meant func(Event) bool, auditLogs []string) promise.Verdict {
	const id = "cluster.nodes-stay-ready"
	var expected, unexpected []Event
	for _, e := range seen {
		switch {
		case e.Kind != NotReady:
		case meant(e):
			expected = append(expected, e)
		default:
			unexpected = append(unexpected, e)
		}
	}
	var evidence []string
	for _, e := range expected {
		evidence = append(evidence, "meant: "+e.String())
	}
	if len(unexpected) == 0 {
		return promise.Verdict{ID: id, Outcome: promise.Pass,
			Evidence: append([]string{fmt.Sprintf("no node left Ready but one a step acted on (%d did)", len(expected))}, evidence...)}
	}
	// The nodes a step acted on: an apiserver being upgraded or faulted.
	acted := map[string]bool{}
	for _, e := range seen {
		if meant(e) {
			acted[e.Node] = true
		}
	}
	requests, err := requestsBefore(auditLogs, unexpected)
	var causes, lines []string
	for _, e := range unexpected {
		cause, why := promise.UnknownCause, "its kubelet's requests could not be read: "+fmt.Sprint(err)
		if err == nil {
			cause, why = whyNotReady(e, requests, acted)
		}
		causes = append(causes, cause)
		lines = append(lines, e.String()+"; "+why)
		for _, l := range e.Logs {
			lines = append(lines, "  its kubelet: "+l)
		}
		for _, c := range e.Connections {
			lines = append(lines, "  through the load balancer, on: "+c)
		}
	}
	return promise.Verdict{ID: id, Outcome: promise.Fail, Causes: causes, Evidence: append(lines, evidence...),
		Reason: fmt.Sprintf("%d node(s) no step acted on left Ready, first: %s", len(unexpected), lines[0])}
}

// request is the final audit event of one request and the apiserver that
// logged it.
type request struct {
	server             string
	user               string
	received, answered time.Time
	code               int32
	message            string
}

func (r request) failed() bool { return r.code >= 500 || r.code == 0 }

// requestsBefore reads, of the audit logs at paths, every request
// finished in the stretches before the events, by anyone.
func requestsBefore(paths []string, events []Event) ([]request, error) {
	if len(paths) == 0 {
		return nil, errors.New("no audit log")
	}
	within := func(t time.Time) bool {
		return slices.ContainsFunc(events, func(e Event) bool {
			return !t.Before(e.Time.Add(-beforeNotReady)) && !t.After(e.Time)
		})
	}
	var out []request
	for _, p := range paths {
		evs, err := audit.Read(p, func(e *audit.Event) bool {
			return (e.Stage == auditv1.StageResponseComplete || e.Stage == auditv1.StagePanic) && within(e.RequestReceivedTimestamp.Time)
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			r := request{server: audit.ServerOf(p), user: e.User.Username, received: e.RequestReceivedTimestamp.Time, answered: e.StageTimestamp.Time}
			if e.ResponseStatus != nil {
				r.code, r.message = e.ResponseStatus.Code, e.ResponseStatus.Message
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// whyNotReady gives the cause of e from the requests around it: its
// kubelet's, and everyone's; acted are the nodes a step acted on.
func whyNotReady(e Event, requests []request, acted map[string]bool) (cause, why string) {
	user := "system:node:" + e.Node
	from := e.Time.Add(-beforeNotReady)
	// Those answered by the time it left Ready: one sent before and
	// answered after (the kubelet's first request once its apiserver was
	// back) cannot say why it left.
	var mine []request
	for _, r := range requests {
		if r.user == user && !r.received.Before(from) && !r.answered.After(e.Time) {
			mine = append(mine, r)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].received.Before(mine[j].received) })
	// Its last stretch of failures, back from the moment it left Ready.
	first := len(mine)
	for first > 0 && mine[first-1].failed() {
		first--
	}
	failed := mine[first:]
	if len(failed) == 0 {
		said := fmt.Sprintf("its kubelet's %d request(s) in the %s before did not fail at any apiserver", len(mine), beforeNotReady) + kubeletSaw(e.Logs)
		return stuckUnlogged(e, requests, acted, said)
	}
	at := map[string]int{}
	codes := map[string]int{}
	for _, r := range failed {
		at[r.server]++
		msg := strings.TrimSpace(r.message)
		if len(msg) > 80 {
			msg = msg[:80] + "..."
		}
		codes[strings.TrimSpace(fmt.Sprintf("%d %s", r.code, msg))]++
	}
	said := fmt.Sprintf("its kubelet's last %d request(s) (%s to %s) all failed, at %s: %s", len(failed),
		failed[0].received.UTC().Format("15:04:05"), failed[len(failed)-1].received.UTC().Format("15:04:05"), counted(at), counted(codes))
	if len(at) > 1 {
		return promise.UnknownCause, said + "; more than one apiserver failed it"
	}
	stuck := failed[0].server
	served := map[string]int{} // others' requests each apiserver served meanwhile
	for _, r := range requests {
		if r.user != user && !r.failed() && !r.received.Before(failed[0].received) && !r.received.After(e.Time) {
			served[r.server]++
		}
	}
	var others []string
	for s, n := range served {
		if s != stuck && n > 0 {
			others = append(others, fmt.Sprintf("%s %d", s, n))
		}
	}
	sort.Strings(others)
	if len(others) == 0 {
		return promise.UnknownCause, said + "; no other apiserver served anyone meanwhile"
	}
	return CauseStuckOnOneAPIServer, said + "; meanwhile the others served other clients (" + strings.Join(others, ", ") + ")"
}

// counted writes a tally as "a 3, b 1", the largest first.
func counted(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(out, ", ")
}

// stuckUnlogged names the cause of e when no apiserver logged its
// kubelet's failing requests: stuck-on-one-apiserver when its kubelet
// saw them time out, every connection of its node through the load
// balancer was on the apiserver of one node a step acted on (upgraded in
// place: its etcd member down, then the apiserver itself restarted before
// it ended them), and the other apiservers served other clients
// meanwhile. Otherwise the cause is unknown, and said says what was seen.
func stuckUnlogged(e Event, requests []request, acted map[string]bool, said string) (cause, why string) {
	backends := map[string]bool{}
	for _, c := range e.Connections {
		if name, _, ok := strings.Cut(c, " since "); ok {
			backends[name] = true
		}
	}
	if len(backends) == 0 {
		return promise.UnknownCause, said + "; the load balancer's log names no connection of the node open then"
	}
	var stuck string
	for b := range backends {
		stuck = b
	}
	timedOut := kubeletShapes(e.Logs)["timed out"] > 0
	switch {
	case len(backends) > 1:
		return promise.UnknownCause, said + "; its connections through the load balancer were on more than one apiserver"
	case !acted[stuck]:
		return promise.UnknownCause, said + "; its connections through the load balancer were all on " + stuck + ", a node no step acted on"
	case !timedOut:
		return promise.UnknownCause, said + "; its connections were all on " + stuck + ", but its kubelet logged no timeout"
	}
	served := map[string]int{}
	for _, r := range requests {
		if r.server != stuck && !r.failed() && !r.received.Before(e.Time.Add(-nodeGrace)) && !r.received.After(e.Time) {
			served[r.server]++
		}
	}
	if len(served) == 0 {
		return promise.UnknownCause, said + "; its connections were all on " + stuck + ", and no other apiserver served anyone meanwhile"
	}
	return CauseStuckOnOneAPIServer, said + "; its connections through the load balancer were all on the apiserver of " + stuck +
		" (a node a step acted on), which logged none of them; meanwhile the others served other clients (" + counted(served) + ")"
}

// nodeGrace is the node monitor's grace period (since v1.32): how long a
// node's kubelet went unheard before it was marked not Ready.
const nodeGrace = 50 * time.Second

// kubeletFailures are the shapes of failure a kubelet's error lines name,
// by what they say.
var kubeletFailures = []struct{ shape, says string }{
	{"timed out", "Client.Timeout exceeded"},
	{"timed out", "context deadline exceeded"},
	{"timed out", "i/o timeout"},
	{"connection lost", "http2: client connection lost"},
	{"refused", "connection refused"},
	{"reset", "connection reset"},
	{"closed", "EOF"},
	{"no route", "no route to host"},
}

// kubeletShapes tallies the failures a kubelet's error lines name, by
// shape.
func kubeletShapes(lines []string) map[string]int {
	shapes := map[string]int{}
	for _, l := range lines {
		for _, f := range kubeletFailures {
			if strings.Contains(l, f.says) {
				shapes[f.shape]++
				break
			}
		}
	}
	return shapes
}

// kubeletSaw says what a kubelet's error lines name of its requests:
// where no apiserver logged them, what the kubelet itself saw.
func kubeletSaw(lines []string) string {
	shapes := kubeletShapes(lines)
	if len(shapes) == 0 {
		return fmt.Sprintf("; its kubelet logged %d error line(s) naming no request failure", len(lines))
	}
	return fmt.Sprintf("; its kubelet's last %d error line(s) say its requests %s", len(lines), counted(shapes))
}
