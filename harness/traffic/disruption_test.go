package traffic

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/certify"
)

func TestDisruptionTable(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	rec := func(s float64, target string, code int, lat time.Duration) Record {
		return Record{Time: at(s), Target: target, Code: code, Latency: lat, Verb: "get"}
	}
	records := []Record{
		rec(0, "cp2", 200, 10*time.Millisecond),
		rec(0, "lb", 200, 20*time.Millisecond),
		rec(1, "lb", 0, 0), // down from 1 s ...
		rec(2, "lb", 503, 5*time.Millisecond),
		rec(3.5, "lb", 200, 30*time.Millisecond), // ... to 3.5 s
		rec(4, "lb", 404, 10*time.Millisecond),   // a 404 is an answer
		rec(5, "lb", 0, 0),                       // down again for 0.5 s
		rec(5.5, "lb", 201, 40*time.Millisecond),
		rec(1, "cp2", 0, 0), // cp2 never comes back: 1 s to its last failure
		rec(2, "cp2", 0, 0),
		{Time: at(2), Target: "lb", Verb: "watch-event", Code: 200},
	}
	table := Disruption(records)
	if len(table) != 2 || table[0].Target != "lb" || table[1].Target != "cp2" {
		t.Fatalf("targets %+v, want lb then cp2", table)
	}
	lb, cp := table[0], table[1]
	if lb.Requests != 7 || lb.Failed != 3 || lb.Codes[0] != 2 || lb.Codes[503] != 1 || lb.Codes[404] != 1 {
		t.Errorf("lb: %+v", lb)
	}
	if lb.Unavailable != 2500*time.Millisecond {
		t.Errorf("lb unavailable %s, want the longest stretch, 2.5s", lb.Unavailable)
	}
	if lb.P99 != 30*time.Millisecond || lb.P50 != 20*time.Millisecond { // percentile: nearest rank below
		t.Errorf("lb p50 %s p99 %s over the answered requests", lb.P50, lb.P99)
	}
	if cp.Failed != 2 || cp.Unavailable != time.Second {
		t.Errorf("cp2: %+v, want 2 failed and 1s unavailable", cp)
	}

	if v := DisruptionVerdict(table, MaxFailedThroughLB); v.Outcome != certify.Fail || !strings.Contains(v.Reason, "fewer than the 100") {
		t.Errorf("7 requests: %+v", v)
	}
	many := []Record{}
	for i := range 1000 {
		code := 200
		if i < 10 {
			code = 503
		}
		many = append(many, rec(float64(i)/10, "lb", code, time.Millisecond))
	}
	if v := DisruptionVerdict(Disruption(many), MaxFailedThroughLB); v.Outcome != certify.Pass {
		t.Errorf("10 of 1000 failed, within 1%%: %+v", v)
	}
	many[10].Code = 0
	if v := DisruptionVerdict(Disruption(many), MaxFailedThroughLB); v.Outcome != certify.Fail || !strings.Contains(v.Reason, "1.10% of requests through the load balancer failed (11 of 1000)") {
		t.Errorf("11 of 1000 failed: %+v", v)
	}
	if v := DisruptionVerdict(table[1:], MaxFailedThroughLB); v.Outcome != certify.Fail {
		t.Errorf("no lb row: %+v", v)
	}
}
