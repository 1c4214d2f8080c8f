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
		bad, last := judgeKilled(tc.as, tc.alone)
		if len(bad) != tc.bad || last != tc.lastFail {
			t.Errorf("%s: %d bad %v, last failed at %s; want %d bad, last at %s", tc.name, len(bad), bad, last, tc.bad, tc.lastFail)
		}
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
	if v := peerProxyErrorsMoved(v135, before, before, nil); v.Outcome != certify.Skipped {
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
