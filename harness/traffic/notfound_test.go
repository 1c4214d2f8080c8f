package traffic

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// A false 404 is put down to a rebuilt peer cache only on its apiserver's
// own lines: a failed rebuild shortly before and, on a v1.35 server, the
// request falling through for the resource; anything less stays unknown.
func TestNotFoundIsExplainedOnlyByTheAnsweringServersLog(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 16, 20, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	logged := func(node, id string) audit.Logged {
		return audit.Logged{Path: "/state/audit/" + node + "/audit.log",
			Event: audit.Event{AuditID: types.UID(id), Stage: "ResponseComplete", ResponseStatus: &metav1.Status{Code: 404}}}
	}
	line := func(ms int, text string) cluster.LogLine {
		return cluster.LogLine{Source: "0.log", Time: at(ms), Text: text}
	}
	failedFor := func(peer string) string {
		id := identity(peer)
		return "I1203 16:19:59.500000 1 peer_discovery.go:232] Error syncing discovery for peer lease " + id + ": failed to get host port info from identity lease for server " + id + ": missing port in address"
	}
	rebuild := failedFor("cp-capable") // the v1.36.3 peer that serves the resource
	const (
		fell  = "E1203 16:20:00.001000 1 peerproxy_handler.go:206] gvr admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicies is not served by anything in this cluster"
		other = "E1203 16:20:00.001000 1 peerproxy_handler.go:206] gvr x/v1, Resource=things is not served by anything in this cluster"
	)
	logs := map[string][]cluster.LogLine{
		"cp-old":    {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-500, rebuild), line(1, fell)},
		"cp-nofall": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-500, rebuild), line(1, other)},
		"cp-stale": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-120000, rebuild),
			line(-60000, "I1203 16:19:00 1 peerproxy_handler.go:283] Proxying request for /api from  to 172.18.0.6:6443"), line(1, fell)},
		// Seen in place: the last rebuild failed two minutes before, and none followed.
		"cp-stuck": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-120000, rebuild), line(1, fell)},
		// A rebuild under way at the 404 has not stored its cache yet.
		"cp-inflight": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-3000, rebuild),
			line(-200, "I1203 16:19:59 1 peerproxy_handler.go:283] Proxying request for /api from  to 172.18.0.6:6443"), line(1, fell)},
		// The 404 came between the rebuild storing its cache and logging
		// that it failed.
		"cp-storing": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"),
			line(-90, "I1203 16:19:59 1 peerproxy_handler.go:283] Proxying request for /api from  to 172.18.0.6:6443"), line(1, fell), line(30, rebuild)},
		// The failure was an earlier apiserver's, on the same node.
		"cp-restarted": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-120000, rebuild),
			line(-60000, "I1203 16:19:00 1 server.go:150] Version: v1.35.4"), line(1, fell)},
		"cp-new":     {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.36.3"), line(-500, failedFor("cp-v137"))},
		"cp-newonly": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.36.3")},
		// The rebuild failed to fetch a peer, but not one that serves the
		// resource: an older one, one of its own version, one that is no
		// node of the cluster.
		"cp-oldpeer": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-500, failedFor("cp-oldpeer2")), line(1, fell)},
		"cp-same":    {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.36.3"), line(-500, rebuild)},
		"cp-unknown": {line(-600000, "I1203 16:10:00 1 server.go:150] Version: v1.35.4"), line(-500, failedFor("cp-nowhere")), line(1, fell)},
		// The peers, by their own kept logs.
		"cp-capable":  {line(-700000, "I1203 16:08:00 1 server.go:150] Version: v1.35.4"), line(-650000, "I1203 16:09:10 1 server.go:150] Version: v1.36.3")},
		"cp-v137":     {line(-700000, "I1203 16:08:00 1 server.go:150] Version: v1.37.2")},
		"cp-oldpeer2": {line(-700000, "I1203 16:08:00 1 server.go:150] Version: v1.35.4")},
	}
	read := func(node string) ([]cluster.LogLine, error) {
		if node == "cp-gone" {
			return nil, errors.New("no such file")
		}
		return logs[node], nil
	}
	var records []Record
	events := map[string][]audit.Logged{}
	for _, node := range []string{"cp-old", "cp-nofall", "cp-stale", "cp-stuck", "cp-inflight", "cp-storing", "cp-restarted", "cp-new", "cp-newonly", "cp-gone",
		"cp-oldpeer", "cp-same", "cp-unknown"} {
		records = append(records, Record{Time: t0, Target: "lb", Verb: "list", Object: "mutatingadmissionpolicies", Code: 404, AuditID: node})
		events[node] = []audit.Logged{logged(node, node)}
	}
	records = append(records, Record{Time: t0, Target: "lb", Verb: "list", Code: 404, AuditID: "not-logged"})
	nodes := []string{"cp-old", "cp-capable", "cp-v137", "cp-oldpeer2", "cp-same"}
	got := ExplainNotFound(records, "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies", events, read, nodes)
	want := map[string]string{
		"cp-old":       CausePeerCacheRebuilt,
		"cp-nofall":    promise.UnknownCause, // a fall-through for another resource says nothing
		"cp-stale":     promise.UnknownCause, // a rebuild since, with no failure
		"cp-stuck":     CausePeerCacheRebuilt,
		"cp-inflight":  CausePeerCacheRebuilt,
		"cp-storing":   CausePeerCacheRebuilt,
		"cp-restarted": promise.UnknownCause,
		"cp-new":       CausePeerCacheRebuilt,
		"cp-newonly":   promise.UnknownCause,
		"cp-gone":      promise.UnknownCause,
		"cp-oldpeer":   promise.UnknownCause, // the peer it missed serves nothing it does not
		"cp-same":      promise.UnknownCause, // a peer of its own version
		"cp-unknown":   promise.UnknownCause, // a peer no node of the cluster is
		"not-logged":   promise.UnknownCause,
	}
	for _, n := range got {
		if n.Cause != want[n.AuditID] {
			t.Errorf("%s: cause %q, want %q (%s)", n.AuditID, n.Cause, want[n.AuditID], n)
		}
	}
	if s := got[0].String(); !strings.Contains(s, "answered by cp-old (v1.35.4)") || !strings.Contains(s, "Error syncing discovery") || !strings.Contains(s, "not served by anything") ||
		!strings.Contains(s, "the capable peer cp-capable (v1.36.3)") {
		t.Errorf("evidence %q does not say who answered and what it logged", s)
	}
	v := Summary{Requests: MinRequests, NewAPIProbed: true, FalseNotFoundRecords: records, NotFound: got}.Verdicts()[2]
	if v.ID != "rollout.no-false-404" || v.Outcome != promise.Fail || len(v.Causes) != len(records) || v.Causes[0] != CausePeerCacheRebuilt {
		t.Errorf("verdict %+v, want a failure with a cause per 404", v)
	}
}

// An apiserver's identity is its host's: the one a kube-apiserver on the
// node skewer-vendor-in-place-control-plane2 logged as its own Lease when
// it stopped (a real run's kept log, session 19).
func TestIdentity(t *testing.T) {
	if got := identity("skewer-vendor-in-place-control-plane2"); got != "apiserver-hzwhbpn6wpl6dspgjr56athtsi" {
		t.Errorf("identity = %s", got)
	}
}
