package certification

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/version"
)

func TestJudgeKilled(t *testing.T) {
	a := func(at, took time.Duration, code int) Attempt { return Attempt{At: at, Took: took, Code: code} }
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
		bad, causes, last := judgeKilled(tc.as, tc.alone, false)
		if len(bad) != tc.bad || len(causes) != tc.bad || last != tc.lastFail {
			t.Errorf("%s: %d bad %v (causes %v), last failed at %s; want %d bad, last at %s", tc.name, len(bad), bad, causes, last, tc.bad, tc.lastFail)
		}
	}
	// A 404 after the entry server rebuilt its peer cache without the
	// dead peer has that cause; a hang never does.
	as := []Attempt{a(0, 5*ms, 503), a(8*time.Second, ms, 404), a(9*time.Second, 12*time.Second, 503)}
	_, causes, _ := judgeKilled(as, true, true)
	if strings.Join(causes, ",") != CausePeerCacheRebuilt+","+certify.UnknownCause {
		t.Errorf("causes: %v", causes)
	}
	_, causes, _ = judgeKilled(as[:2], true, false)
	if strings.Join(causes, ",") != certify.UnknownCause {
		t.Errorf("a 404 with no rebuild logged: causes %v", causes)
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
	if v := peerProxyErrorsMoved(v136, before, after, nil); v.Outcome != certify.Pass || !strings.Contains(v.Evidence[0], "moved by 12") {
		t.Errorf("moved by 12: %+v", v)
	}
	if v := peerProxyErrorsMoved(v136, before, before, nil); v.Outcome != certify.Fail || !strings.Contains(v.Reason, "not exported") {
		t.Errorf("never incremented on a 1.36 server: %+v", v)
	}
	if v := peerProxyErrorsMoved(v135, before, before, nil); v.Outcome != certify.NotApplicable {
		t.Errorf("a 1.35 server has no such metric: %+v", v)
	}
	if v := peerProxyErrorsMoved(v136, before, nil, errors.New("refused")); v.Outcome != certify.Fail {
		t.Errorf("a failed scrape: %+v", v)
	}
	for _, v := range []certify.Verdict{peerProxyErrorsMoved(v136, before, after, nil), peerProxyErrorsMoved(v135, before, before, nil)} {
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
