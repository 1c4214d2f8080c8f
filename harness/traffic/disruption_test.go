package traffic

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
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

	budget := promise.DefaultBudget
	if v := DisruptionVerdict(table, budget); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "fewer than the 100") ||
		!strings.Contains(v.Reason, "no request went through the load balancer on new connections") {
		t.Errorf("7 requests, none on a new connection: %+v", v)
	}
	// Each kind of connection is judged on its own: 1000 requests each, a
	// stretch of failures on the reused connection (its backend restarting)
	// and failures spread thinly over the new ones.
	var many []Record
	for i := range 1000 {
		reused, fresh := rec(float64(i)/10, "lb", 200, time.Millisecond), rec(float64(i)/10, "lb", 201, time.Millisecond)
		reused.Conn, fresh.Conn = Reused, New
		if i >= 100 && i < 110 { // 1 s down, 10 failed
			reused.Code = 0
		}
		if i%100 == 0 {
			fresh.Code = 503
		}
		many = append(many, reused, fresh)
	}
	v := DisruptionVerdict(Disruption(many), budget)
	if v.Outcome != promise.Pass || len(v.Evidence) != 3 || !strings.Contains(v.Evidence[1], "lb, reused connections: 10 of 1000 requests failed (1.00%), longest unavailable 1s") ||
		!strings.Contains(v.Evidence[2], "lb, new connections: 10 of 1000") {
		t.Errorf("10 of 1000 failed on each, within 1%%: %+v", v)
	}
	budget.MaxUnavailableReused = 900 * time.Millisecond
	if v := DisruptionVerdict(Disruption(many), budget); v.Outcome != promise.Fail || v.Reason != "reused connections through the load balancer were unavailable for 1s, over the bound of 900ms" {
		t.Errorf("a reused connection down for 1s, bound 900ms: %+v", v)
	}
	budget.MaxUnavailableReused = 0
	many[3].Code = 0 // a second new connection fails at the start: 11 of 1000
	if v := DisruptionVerdict(Disruption(many), budget); v.Outcome != promise.Fail || v.Reason != "1.10% of requests on new connections through the load balancer failed (11 of 1000), over the budget of 1%" {
		t.Errorf("11 of 1000 failed: %+v", v)
	}
	if v := DisruptionVerdict(table[1:], budget); v.Outcome != promise.Fail {
		t.Errorf("no lb row: %+v", v)
	}
	// A peer killed on purpose: the 503s while the fault was injected
	// are its promise's, not the rollout's; the same 503s outside a fault
	// are the rollout's.
	for i := 200; i < 216; i++ {
		many[2*i].Code, many[2*i].Fault = 503, true
	}
	if v := DisruptionVerdict(Disruption(many), budget); v.Outcome != promise.Fail || !strings.Contains(v.Evidence[1], "lb, reused connections: 10 of 984 requests failed") {
		t.Errorf("16 503s in a fault left out: %+v", v)
	}
	for i := 200; i < 216; i++ {
		many[2*i].Fault = false
	}
	if v := DisruptionVerdict(Disruption(many), budget); !strings.Contains(v.Reason, "2.60% of requests on reused connections through the load balancer failed (26 of 1000)") {
		t.Errorf("16 503s outside a fault: %+v", v)
	}
}

func TestBudgetValidate(t *testing.T) {
	if err := promise.DefaultBudget.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []promise.Budget{{MaxFailed: 1.5}, {MaxFailed: -0.1}, {MaxUnavailable: -time.Second}} {
		if err := b.Validate(); err == nil {
			t.Errorf("%+v accepted", b)
		}
	}
}

// Steps are the load balancer's requests phase by phase, in the order the
// phases began, reused before new; the apiservers addressed directly and
// the watch's events are not requests through it.
func TestStepsThroughTheLoadBalancer(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	rec := func(s int, phase, target, conn string, code int, lat time.Duration) Record {
		return Record{Time: t0.Add(time.Duration(s) * time.Second), Phase: phase, Target: target, Conn: conn, Code: code, Latency: lat, Verb: "get"}
	}
	steps := Steps([]Record{
		rec(0, "join", "lb", New, 201, 10*time.Millisecond),
		rec(0, "join", "lb", Reused, 200, 20*time.Millisecond),
		rec(1, "join", "lb", Reused, 503, 30*time.Millisecond),
		rec(1, "join", "cp1", Reused, 0, 0),
		rec(2, "drain", "lb", Reused, 0, 0),
		rec(3, "drain", "lb", Reused, 200, 40*time.Millisecond),
		{Time: t0, Phase: "join", Target: "lb", Conn: Reused, Verb: "watch-event", Code: 200},
	})
	if len(steps) != 3 {
		t.Fatalf("%d steps, want join (reused, new) and drain: %+v", len(steps), steps)
	}
	join, joinNew, drain := steps[0], steps[1], steps[2]
	if join.Phase != "join" || join.Conn != Reused || join.Requests != 2 || join.Failed != 1 || join.P50 != 20*time.Millisecond || join.P99 != 20*time.Millisecond {
		t.Errorf("join, reused: %+v", join)
	}
	if joinNew.Conn != New || joinNew.Requests != 1 || joinNew.Failed != 0 {
		t.Errorf("join, new: %+v", joinNew)
	}
	if drain.Phase != "drain" || drain.Requests != 2 || drain.Failed != 1 || drain.P50 != 40*time.Millisecond {
		t.Errorf("drain: a request with no response has no latency: %+v", drain)
	}
	// Each step lies where its requests were sent (the watch event and the
	// direct request are not its).
	if !join.First.Equal(t0) || !join.Last.Equal(t0.Add(time.Second)) || !drain.First.Equal(t0.Add(2*time.Second)) || !drain.Last.Equal(t0.Add(3*time.Second)) {
		t.Errorf("join from %s to %s, drain from %s to %s", join.First, join.Last, drain.First, drain.Last)
	}
}

// A request is a fault's when it was under way at any time of one: begun
// before and cut short in it, or begun in it and answered after its end.
func TestOverlap(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 17, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	faults := []span{{from: at(10), to: at(20)}, {from: at(30)}}
	for _, c := range []struct {
		from, to float64
		want     bool
	}{
		{0, 9, false}, {8, 12, true}, {12, 14, true}, {18, 25, true}, {21, 29, false}, {20, 29, false}, {29, 31, true}, {40, 41, true},
	} {
		if got := overlap(faults, at(c.from), at(c.to)); got != c.want {
			t.Errorf("a request from %gs to %gs: %t, want %t", c.from, c.to, got, c.want)
		}
	}
}
