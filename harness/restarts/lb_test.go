package restarts

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// The load balancer's log of session 15's CI pre-run (suites/distribution, in
// place): the worker (172.18.0.4) left Ready at 14:31:17 with every
// connection on control-plane3 (172.18.0.5), being upgraded, which ended
// them at 14:31:49; the one to control-plane2 had closed at its upgrade.
const lbLog = `2026-12-03T14:21:40.002281731Z 2026/12/03 14:21:40.002126 conn 172.18.0.4:54564 -> 172.18.0.5:6443 opened
2026-12-03T14:21:52.994286724Z 2026/12/03 14:21:52.993634 conn 172.18.0.4:42420 -> 172.18.0.3:6443 opened
2026-12-03T14:21:53.755301039Z 2026/12/03 14:21:53.751898 conn 172.18.0.4:42428 -> 172.18.0.5:6443 opened
2026-12-03T14:22:00.000000000Z 2026/12/03 14:22:00.000000 conn 172.18.0.7:40000 -> 172.18.0.3:6443 opened
2026-12-03T14:28:57.933755056Z 2026/12/03 14:28:57.933337 conn 172.18.0.4:42420 -> 172.18.0.3:6443 closed after 7m4.94s, the backend ended first (client sent 4350 B, backend 126129 B)
2026-12-03T14:28:57.944905951Z 2026/12/03 14:28:57.944817 conn 172.18.0.4:50366 -> 172.18.0.5:6443 opened
2026-12-03T14:31:32.726044968Z 2026/12/03 14:31:32.725820 conn 172.18.0.4:45558 -> 172.18.0.6:6443 opened
2026-12-03T14:31:49.727084349Z 2026/12/03 14:31:49.726503 conn 172.18.0.4:50366 -> 172.18.0.5:6443 closed after 2m51.782s, the backend ended first (client sent 3659 B, backend 69477 B)
`

func TestOpenAt(t *testing.T) {
	at := time.Date(2026, 12, 3, 14, 31, 17, 0, time.UTC)
	said := func(cs []conn) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.String())
		}
		return out
	}
	got := said(openAt(lbLog, "172.18.0.4", at))
	want := []string{"172.18.0.5 since 14:21:40", "172.18.0.5 since 14:21:53", "172.18.0.5 since 14:28:57"}
	if !slices.Equal(got, want) {
		t.Errorf("open at 14:31:17: %q, want %q", got, want)
	}
	if got := said(openAt(lbLog, "172.18.0.4", at.Add(time.Minute))); !slices.Equal(got, []string{"172.18.0.5 since 14:21:40", "172.18.0.5 since 14:21:53", "172.18.0.6 since 14:31:32"}) {
		t.Errorf("open at 14:32:17: %q", got)
	}
	lines := []string{`E1203 14:30:23.452334     286 controller.go:251] "Failed to update lease" err="Put \"https://skewer-vendor-in-place-external-load-balancer:6443/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/w?timeout=10s\": net/http: request canceled (Client.Timeout exceeded while awaiting headers)"`}
	if h := lbHost(lines); h != "skewer-vendor-in-place-external-load-balancer" {
		t.Errorf("load balancer host %q", h)
	}
}

// No apiserver logged the worker's requests: its connections, all on the
// control plane being upgraded, name the cause; on a node no step acted
// on, or spread over two, it stays unknown.
func TestStuckUnlogged(t *testing.T) {
	at := time.Date(2026, 12, 3, 14, 31, 17, 0, time.UTC)
	worker := Event{Kind: NotReady, Node: "worker", Time: at, Reason: "NodeStatusUnknown",
		Logs:        []string{`E1203 14:30:23.452334 286 controller.go:251] "Failed to update lease" err="Put \"https://lb:6443/x?timeout=10s\": net/http: request canceled (Client.Timeout exceeded while awaiting headers)"`},
		Connections: []string{"cp3 since 14:21:40", "cp3 since 14:28:57"}}
	cp3 := Event{Kind: NotReady, Node: "cp3", ControlPlaneNode: true, Time: at}
	meant := Meant([]Span{{Start: at.Add(-10 * time.Minute), End: at.Add(time.Minute), Restarts: []string{ControlPlane}}})
	logs := auditLogs(t, at.Add(-60*time.Second), auditReq{"cp1", "admin", 30, 200, 0}, auditReq{"cp2", "admin", 40, 201, 0}, auditReq{"cp3", "system:node:worker", -30, 200, 0})
	v := StayReady([]Event{worker, cp3}, meant, logs)
	if v.Outcome != promise.Fail || v.Causes[0] != CauseStuckOnOneAPIServer || !strings.Contains(v.Reason, "all on the apiserver of cp3 (a node a step acted on), which logged none of them") {
		t.Fatalf("stuck, unlogged: %+v", v)
	}
	if !slices.Contains(v.Evidence, "  through the load balancer, on: cp3 since 14:28:57") {
		t.Errorf("evidence: %q", v.Evidence)
	}
	for name, tc := range map[string]struct {
		conns []string
		seen  []Event
		why   string
	}{
		"two backends":   {[]string{"cp3 since 14:21:40", "cp1 since 14:28:57"}, []Event{worker, cp3}, "more than one apiserver"},
		"not acted on":   {[]string{"cp1 since 14:21:40"}, []Event{worker, cp3}, "a node no step acted on"},
		"no connections": {nil, []Event{worker, cp3}, "names no connection"},
	} {
		e := worker
		e.Connections = tc.conns
		seen := append([]Event{e}, tc.seen[1:]...)
		v := StayReady(seen, meant, logs)
		if v.Causes[0] != promise.UnknownCause || !strings.Contains(v.Reason, tc.why) {
			t.Errorf("%s: %+v", name, v)
		}
	}
}
