package certification

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/version"
)

func TestJudgeKilled(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	a := func(at, took time.Duration, code int) Attempt {
		return Attempt{At: at, Sent: t0.Add(at), Took: took, Code: code}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		as       []Attempt
		alone    bool
		bad      int
		lastFail time.Duration
	}{
		{"alone: refused, then unresolvable, 503s all", []Attempt{a(0, 5*ms, 503), a(16*time.Second, 3*ms, 503)}, true, 0, 16 * time.Second},
		{"alone: a false 404", []Attempt{a(0, 5*ms, 503), a(time.Second, 3*ms, 404)}, true, 1, time.Second},
		{"alone: a hang past the bound", []Attempt{a(0, 11*time.Second, 503)}, true, 1, 0},
		{"alone: no response", []Attempt{a(0, 30*time.Second, 0)}, true, 1, 0},
		{"alone: served by nothing, yet 200", []Attempt{a(0, 5*ms, 200)}, true, 1, 0},
		{"two: 503s until the record expires, then served", []Attempt{a(time.Second, 5*ms, 503), a(14*time.Second, 5*ms, 200), a(15*time.Second, 5*ms, 503), a(25*time.Second, 5*ms, 200)}, false, 0, 15 * time.Second},
		{"two: still 503 long after", []Attempt{a(25*time.Second, 5*ms, 503)}, false, 1, 25 * time.Second},
		{"two: a false 404", []Attempt{a(time.Second, 5*ms, 404)}, false, 1, time.Second},
	} {
		bad, causes, last := judgeKilled(tc.as, tc.alone, time.Time{})
		if len(bad) != tc.bad || len(causes) != tc.bad || last != tc.lastFail {
			t.Errorf("%s: %d bad %v (causes %v), last failed at %s; want %d bad, last at %s", tc.name, len(bad), bad, causes, last, tc.bad, tc.lastFail)
		}
	}
	// A 404 answered after the entry server logged the rebuild of its
	// peer cache without the dead peer has that cause; one before the
	// line has none, and a hang never does.
	as := []Attempt{a(0, 5*ms, 503), a(8*time.Second, ms, 404), a(9*time.Second, 12*time.Second, 503)}
	_, causes, _ := judgeKilled(as, true, t0.Add(7*time.Second))
	if strings.Join(causes, ",") != CausePeerCacheRebuilt+","+promise.UnknownCause {
		t.Errorf("causes: %v", causes)
	}
	_, causes, _ = judgeKilled(as[:2], true, time.Time{})
	if strings.Join(causes, ",") != promise.UnknownCause {
		t.Errorf("a 404 with no rebuild logged: causes %v", causes)
	}
	_, causes, _ = judgeKilled(as[:2], true, t0.Add(9*time.Second))
	if strings.Join(causes, ",") != promise.UnknownCause {
		t.Errorf("a 404 answered before the rebuild was logged: causes %v", causes)
	}
	early := []Attempt{a(2*time.Second, ms, 404), a(8*time.Second, ms, 404), a(9*time.Second, ms, 503)}
	if got := strings.Join(notFoundCauses(early, t0.Add(5*time.Second), CausePeerCacheRebuilt), ","); got != promise.UnknownCause+","+CausePeerCacheRebuilt {
		t.Errorf("untrusted peer, one 404 before the rebuild and one after: %s", got)
	}
}

// The rebuild is found by the peer's ID in the runtime-stamped log, with
// its moment; a line without a stamp gives no order and is no evidence.
func TestFirstRebuildWithout(t *testing.T) {
	logs := "2026-12-04T06:00:01.5Z I1204 06:00:01.500000 1 peer_discovery.go:90] rebuilding\n" +
		"E1204 06:00:02.000000 1 peer_discovery.go:157] error querying discovery endpoint for serverID apiserver-abc: x\n" +
		"2026-12-04T06:00:03.25Z E1204 06:00:03.250000 1 peer_discovery.go:157] error querying discovery endpoint for serverID apiserver-abc: dial tcp: refused\n"
	line, at := firstRebuildWithout(logs, "apiserver-abc")
	if !at.Equal(time.Date(2026, 12, 4, 6, 0, 3, 250_000_000, time.UTC)) || !strings.HasPrefix(line, "E1204 06:00:03.250000") {
		t.Errorf("found %q at %s", line, at)
	}
	if line, at := firstRebuildWithout(logs, "apiserver-other"); line != "" || !at.IsZero() {
		t.Errorf("another peer's rebuild: %q at %s", line, at)
	}
}

func TestPeerProxyErrorsMoved(t *testing.T) {
	parse := func(text string) metrics.Snapshot {
		s, err := metrics.Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const start = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 100\n"
	before := parse(start)
	after := parse(start + "# TYPE apiserver_peer_proxy_errors_total counter\n" +
		`apiserver_peer_proxy_errors_total{group="g",resource="r",type="endpoint_resolution",version="v1"} 12` + "\n")
	v136, v135 := Server{Name: "cp1", Version: version.MustParse("v1.36.3")}, Server{Name: "cp1", Version: version.MustParse("v1.35.4")}
	if v := peerProxyErrorsMoved(v136, before, after, nil); v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "moved by 12") {
		t.Errorf("moved by 12: %+v", v)
	}
	if v := peerProxyErrorsMoved(v136, before, before, nil); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "not exported") {
		t.Errorf("never incremented on a 1.36 server: %+v", v)
	}
	if v := peerProxyErrorsMoved(v135, before, before, nil); v.Outcome != promise.NotApplicable {
		t.Errorf("a 1.35 server has no such metric: %+v", v)
	}
	if v := peerProxyErrorsMoved(v136, before, nil, errors.New("refused")); v.Outcome != promise.Fail {
		t.Errorf("a failed scrape: %+v", v)
	}
	for _, v := range []promise.Verdict{peerProxyErrorsMoved(v136, before, after, nil), peerProxyErrorsMoved(v135, before, before, nil)} {
		if err := v.Validate(); err != nil {
			t.Error(err)
		}
	}
}

func TestPacketsTo(t *testing.T) {
	// iptables v1.8.9 (nf_tables), as a kind node prints it.
	out := `Chain OUTPUT (policy ACCEPT 1869 packets, 311549 bytes)
    pkts      bytes target     prot opt in     out     source               destination
       3      180            tcp  --  *      *       0.0.0.0/0            192.0.2.10
    1903   318024 KUBE-SERVICES  all  --  *      *       0.0.0.0/0            0.0.0.0/0            ctstate NEW /* kubernetes service portals */
`
	if n, err := packetsTo(out, "192.0.2.10"); err != nil || n != 3 {
		t.Errorf("packets to the decoy: %d, %v; want 3", n, err)
	}
	if _, err := packetsTo(out, "192.0.2.11"); err == nil {
		t.Error("no rule for an address, yet a count")
	}
}

// The black hole's bound comes from the deadline the request asks for,
// or the entry's own --request-timeout when that is shorter.
func TestBlackHoleBound(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		asked time.Duration
		want  time.Duration
	}{
		{[]string{"kube-apiserver", "--peer-ca-file=/etc/kubernetes/pki/ca.crt"}, 10 * time.Second, 15 * time.Second},
		{[]string{"kube-apiserver", "--peer-ca-file=/etc/kubernetes/pki/ca.crt"}, 2 * time.Minute, 65 * time.Second},
		{[]string{"kube-apiserver", "--request-timeout=5s"}, 10 * time.Second, 10 * time.Second},
	} {
		if got, err := blackHoleBound(tc.flags, tc.asked); err != nil || got != tc.want {
			t.Errorf("%v asked %s: %s, %v; want %s", tc.flags, tc.asked, got, err, tc.want)
		}
	}
	if _, err := blackHoleBound([]string{"--request-timeout=soon"}, holeDeadline); err == nil {
		t.Error("a --request-timeout that is not a duration gave a bound")
	}
}

// The deadline asked of the server replaces the one client-go states
// from the client's own timeout, and nothing else in the request.
func TestAskingDeadline(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"NamespaceList","apiVersion":"v1","items":[]}`)
	}))
	defer srv.Close()
	cfg := namingAuditID(askingDeadline(&rest.Config{Host: srv.URL, Timeout: 40 * time.Second}, holeDeadline), "a-1")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if q := got.URL.Query(); q.Get("timeout") != "10s" || q.Get("limit") != "1" {
		t.Errorf("the request asked %q", got.URL.RawQuery)
	}
	if id := got.Header.Get("Audit-ID"); id != "a-1" {
		t.Errorf("the request named Audit-ID %q, want a-1", id)
	}
}

// A client under the black hole whose stream was reset at its deadline
// fails the promise; the cause the waiver covers is found only when the
// entry's audit log ends that very request in 503 or 504 at the deadline.
func TestBlackHoleResetAtTheDeadline(t *testing.T) {
	ws := upstreamWaivers(t)
	received := time.Date(2026, 12, 4, 20, 35, 39, 766000000, time.UTC)
	ended := func(code int32, after time.Duration) func(string) (*audit.Event, error) {
		return func(id string) (*audit.Event, error) {
			if id != "a-create" {
				return nil, nil
			}
			return &audit.Event{AuditID: types.UID(id), Stage: auditv1.StageResponseComplete, ResponseStatus: &metav1.Status{Code: code},
				RequestReceivedTimestamp: metav1.NewMicroTime(received), StageTimestamp: metav1.NewMicroTime(received.Add(after))}, nil
		}
	}
	reset := attempt(0, 10010*time.Millisecond, 0)
	reset.Message, reset.AuditID = "stream error: stream ID 7; INTERNAL_ERROR; received from peer", "a-create"
	list := attempt(0, 10020*time.Millisecond, 504)
	list.AuditID = "a-list"
	for _, tc := range []struct {
		name  string
		tried map[string]Attempt
		ended func(string) (*audit.Event, error)
		want  promise.Outcome
	}{
		{"answered 503 at the deadline", map[string]Attempt{"list": list, "create": reset}, ended(503, 10001*time.Millisecond), promise.Waived},
		{"answered 504 at the deadline", map[string]Attempt{"list": list, "create": reset}, ended(504, 10001*time.Millisecond), promise.Waived},
		{"answered before the deadline", map[string]Attempt{"list": list, "create": reset}, ended(503, 2*time.Second), promise.Fail},
		{"answered 201", map[string]Attempt{"list": list, "create": reset}, ended(201, 10001*time.Millisecond), promise.Fail},
		{"not in the audit log", map[string]Attempt{"list": list, "create": reset}, noAudit, promise.Fail},
		{"reset, and a 404 besides", map[string]Attempt{"list": attempt(0, time.Millisecond, 404), "create": reset}, ended(503, 10001*time.Millisecond), promise.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := holeVerdict("black hole cp1 -> cp5", "x/v1/ys", "cp1", 15*time.Second, tc.tried, tc.ended)
			if v.Outcome != promise.Fail {
				t.Fatalf("got %s (%s), want fail before the waivers", v.Outcome, v.Reason)
			}
			if got := ws.Apply(v, false); got.Outcome != tc.want {
				t.Errorf("got %s (%s; causes %v; evidence %q), want %s", got.Outcome, got.Reason, v.Causes, v.Evidence, tc.want)
			}
		})
	}
}
