package guard

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

// steps is a traffic Source fed step by step, as traffic.Traffic's phases
// end: what it returns is every record of the phases ended so far.
type steps struct {
	records    []traffic.Record
	advertised map[string]bool // phase/target
	gone       map[string]bool // apiservers no longer streamed to
}

func (s *steps) Targets() map[string]bool {
	out := map[string]bool{}
	for _, r := range s.records {
		if r.Target != "lb" && !s.gone[r.Target] {
			out[r.Target] = true
		}
	}
	return out
}

func (s *steps) Ended() ([]traffic.Record, func(phase, target string) bool) {
	return s.records, func(phase, target string) bool { return s.advertised[phase+"/"+target] }
}

var t0 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

const older, newer = "v1.35.4", "v1.36.3"

// rec is one request of phase; at is seconds after t0.
func rec(phase, target, server, probe string, code int, at float64, latency time.Duration) traffic.Record {
	return traffic.Record{Time: t0.Add(time.Duration(at * float64(time.Second))), Phase: phase, Target: target, Server: server,
		Probe: probe, Code: code, Latency: latency}
}

// round is one round of the direct streams of two older servers and one
// newer one, and of the load balancer: each writes, reads and asks for the
// newer-only resource; code is what the older ones answer for it.
func round(phase string, at float64, code int) []traffic.Record {
	var out []traffic.Record
	for _, t := range []struct{ target, server string }{{"lb", newer}, {"cp1", older}, {"cp2", older}, {"cp5", newer}} {
		newAPI := 200
		if t.server == older {
			newAPI = code
		}
		out = append(out, rec(phase, t.target, t.server, "write", 201, at, 10*time.Millisecond),
			rec(phase, t.target, t.server, "read", 200, at, 5*time.Millisecond),
			rec(phase, t.target, t.server, "new-api", newAPI, at, 20*time.Millisecond))
	}
	return out
}

func guarded() (*Guard, *steps) {
	src := &steps{advertised: map[string]bool{}, gone: map[string]bool{}}
	return New(Input{Thresholds: promise.DefaultGuard, Rollout: "test", Older: older, Newer: newer}, src), src
}

// after runs one step of phase, over rounds seconds of traffic each
// answered code by the older servers, and asks the guard.
func after(g *Guard, src *steps, phase, node string, start float64, rounds int, code int) error {
	for i := range rounds {
		src.records = append(src.records, round(phase, start+float64(i), code)...)
	}
	return g.After(context.Background(), rollout.Step{Name: phase, Node: node, Start: t0.Add(time.Duration(start * float64(time.Second)))})
}

func TestTailAtLeast(t *testing.T) {
	for _, tc := range []struct {
		n, k int
		p    float64
		want float64
	}{
		{4, 2, 0.01, 1 - math.Pow(0.99, 4) - 4*0.01*math.Pow(0.99, 3)},
		{3, 1, 0.01, 1 - math.Pow(0.99, 3)},
		{10, 0, 0.01, 1},
		{10, 1, 0, 0},
		{10, 10, 1, 1},
	} {
		if got := tailAtLeast(tc.n, tc.k, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("tailAtLeast(%d, %d, %g) = %g, want %g", tc.n, tc.k, tc.p, got, tc.want)
		}
	}
}

func TestHaltsWhenForwardedRequestsFail(t *testing.T) {
	g, src := guarded()
	if err := after(g, src, "01 set the version", "", 0, 1, 200); err != nil {
		t.Fatalf("a healthy step was halted: %v", err)
	}
	// The link to the only server of the resource black-holed: the older
	// servers' forwarded requests go unanswered.
	err := after(g, src, "02 start a node", "cp6", 1, 2, 0)
	if err == nil || !strings.Contains(err.Error(), SignalForwarded) {
		t.Fatalf("two rounds of forwarded requests unanswered: want a breach of %s, got %v", SignalForwarded, err)
	}
	table := g.Table()
	if table.Halted == nil || table.Halted.Signal != SignalForwarded || table.HaltedAfter != "02 start a node" {
		t.Errorf("the table says halted %+v after %q", table.Halted, table.HaltedAfter)
	}
	if got := table.Halted.Value; got != "4/6 (66.7%)" {
		t.Errorf("the breach's value is %q: the first step's 2 answered are carried into the second's sample", got)
	}
}

func TestQuietThroughAHealthyRollout(t *testing.T) {
	g, src := guarded()
	for i, step := range []struct {
		name, node string
		rounds     int
	}{
		{"01 set the version", "", 1}, {"02 start a node", "cp6", 8}, {"03 join", "cp6", 40},
		{"04 remove cp1", "cp1", 10}, {"05 check membership", "", 1},
	} {
		start := float64(10 * i * 10)
		for r := range step.rounds {
			src.records = append(src.records, round(step.name, start+float64(r), 200)...)
		}
		if step.node == "cp1" {
			// The removed server's own requests fail, in the step and as
			// they come back after it.
			src.records = append(src.records, rec(step.name, "cp1", older, "new-api", 0, start+11, 0),
				rec("05 check membership", "cp1", older, "write", 0, start+12, 0))
		}
		if err := g.After(context.Background(), rollout.Step{Name: step.name, Node: step.node, Start: t0.Add(time.Duration(start) * time.Second)}); err != nil {
			t.Fatalf("%s: a healthy step was halted: %v", step.name, err)
		}
	}
	table := g.Table()
	first := table.Steps[0].Signals
	if first[0].Signal != SignalForwarded || first[0].Decision != report.GuardPending {
		t.Errorf("one round is too few to decide the forwarded share on: %+v", first[0])
	}
	if d := table.Steps[1].Signals[0]; d.Decision != report.GuardOK || d.Requests != 2+16 {
		t.Errorf("the second step decides on its own and the first's carried requests: %+v", d)
	}
}

func TestEarlierTrafficIsNotTheRollouts(t *testing.T) {
	g, src := guarded()
	// A fault before the rollout (an apiserver stopped on purpose) left
	// 503s in the phase under way when the rollout began.
	for i := range 5 {
		src.records = append(src.records, rec("30 done", "lb", newer, "write", 503, float64(i), 0))
	}
	if err := after(g, src, "31 set the version", "", 10, 10, 200); err != nil {
		t.Fatalf("what came before the rollout halted it: %v", err)
	}
}

// A rollback takes the servers of the newer-only resource away: the
// requests their peers forward to one while it goes are cut by the
// rollout, not a breach, in the step and the next; the step after reads
// the forwarded requests again.
func TestForwardsToAServerTakenAwayAreTheSteps(t *testing.T) {
	g, src := guarded()
	src.gone["cp5"] = true
	if err := after(g, src, "01 remove cp5", "cp5", 0, 5, 503); err != nil {
		t.Fatalf("forwards to the server the step removed halted the rollout: %v", err)
	}
	if err := after(g, src, "02 check membership", "", 5, 2, 503); err != nil {
		t.Fatalf("forwards cut by the step before halted the rollout: %v", err)
	}
	if v := g.Table().Steps[0].Signals[0].Value; !strings.Contains(v, "the rollout took cp5") {
		t.Errorf("the table does not say why the forwarded requests were not read: %q", v)
	}
	if err := after(g, src, "03 start a node", "cp6", 7, 5, 503); err == nil || !strings.Contains(err.Error(), SignalForwarded) {
		t.Fatalf("503s forwarded two steps later: want a breach of %s, got %v", SignalForwarded, err)
	}
}

func TestHaltsOnAFalse404(t *testing.T) {
	g, src := guarded()
	src.advertised["01 join/cp1"] = true
	if err := after(g, src, "01 join", "cp6", 0, 10, 404); err == nil || !strings.Contains(err.Error(), SignalFalse404) {
		t.Fatalf("404s from a server that advertised the resource: want a breach of %s, got %v", SignalFalse404, err)
	}
}

func TestHaltsWhenForwardingIsSlow(t *testing.T) {
	g, src := guarded()
	for i := range LatencyFloor {
		for _, r := range round("01 join", float64(i), 200) {
			if r.Probe == "new-api" && r.Server == older {
				r.Latency = 2 * time.Second
			}
			src.records = append(src.records, r)
		}
	}
	err := g.After(context.Background(), rollout.Step{Name: "01 join", Start: t0})
	if err == nil || !strings.Contains(err.Error(), SignalAddedP99) || !strings.Contains(err.Error(), "p99 +1.98s (2s forwarded, 20ms local)") {
		t.Fatalf("forwarded requests 2 s slower: want a breach of %s saying by how much, got %v", SignalAddedP99, err)
	}
}

func TestNothingForwardedWithoutANewerOnlyResource(t *testing.T) {
	src := &steps{gone: map[string]bool{}}
	g := New(Input{Thresholds: promise.DefaultGuard, Rollout: "test"}, src)
	if err := after(g, src, "01 join", "", 0, 10, 0); err != nil {
		t.Fatalf("with no resource to forward, failed asks for one are not forwarded: %v", err)
	}
	for _, s := range g.Table().Steps[0].Signals {
		if s.Decision != report.GuardNA && s.Signal != Signal5xx {
			t.Errorf("%s: %s, want n/a", s.Signal, s.Decision)
		}
	}
}

// The totals a rollout's objective is judged on count what the signals
// read: not the forwards a step cut, not what came before the rollout.
func TestTotalsCountWhatTheSignalsRead(t *testing.T) {
	g, src := guarded()
	src.records = append(src.records, rec("00 before", "cp1", older, "new-api", 503, -5, 0))
	src.gone["cp5"] = true
	if err := after(g, src, "01 remove cp5", "cp5", 0, 5, 503); err != nil {
		t.Fatal(err)
	}
	if err := after(g, src, "02 check", "", 5, 1, 503); err != nil {
		t.Fatal(err)
	}
	if err := after(g, src, "03 start a node", "cp6", 6, 10, 200); err != nil {
		t.Fatal(err)
	}
	tot := g.Totals()
	if tot.Forwarded != 20 || tot.Failed != 0 || len(tot.ForwardedLatencies) != 20 || len(tot.LocalLatencies) != 10 {
		t.Errorf("totals %d forwarded, %d failed, %d/%d latencies: want the third step's 20 forwarded and its 10 local",
			tot.Forwarded, tot.Failed, len(tot.ForwardedLatencies), len(tot.LocalLatencies))
	}
	if _, _, ok := tot.P99s(); ok {
		t.Error("a p99 read on 20 samples")
	}
}

// looks is a cluster's discovery as the guard sees it, look by look: the
// apiservers answering (name=version) and what differs, the last look
// repeated.
type looks struct {
	members [][]string
	off     [][]string
	made    int
}

func (l *looks) look(context.Context) (Look, error) {
	i := min(l.made, len(l.off)-1)
	l.made++
	m := map[string]string{}
	for _, kv := range l.members[min(i, len(l.members)-1)] {
		name, v, _ := strings.Cut(kv, "=")
		m[name] = v
	}
	return Look{Members: m, Requests: 2 * len(m), Off: l.off[i]}, nil
}

func discoveryGuarded(l *looks, bound time.Duration) (*Guard, *steps) {
	th := promise.DefaultGuard
	th.MaxDiscoveryConvergence.Duration = bound
	src := &steps{advertised: map[string]bool{}, gone: map[string]bool{}}
	return New(Input{Thresholds: th, Rollout: "test", Older: older, Newer: newer, Discovery: l.look}, src), src
}

func TestDiscoveryAgreesAfterEachStep(t *testing.T) {
	l := &looks{members: [][]string{{"cp1=" + older, "cp2=" + older}, {"cp1=" + older, "cp2=" + older}, {"cp1=" + newer, "cp2=" + older, "cp6=" + newer}},
		off: [][]string{nil, {"cp1 lacks g/v1/things"}, nil}}
	g, src := discoveryGuarded(l, 5*time.Second)
	if err := after(g, src, "01 set the version", "", 0, 1, 200); err != nil {
		t.Fatal(err)
	}
	if err := after(g, src, "02 join", "cp6", 1, 1, 200); err != nil {
		t.Fatalf("discovery agreeing a look after the step halted the rollout: %v", err)
	}
	d := g.Table().Steps[1].Signals[4]
	if d.Signal != SignalDiscovery || d.Decision != report.GuardOK || !strings.Contains(d.Value, "3 apiservers agree after") ||
		!strings.Contains(d.Value, "(cp1 "+older+" -> "+newer+", cp6 joined at "+newer+")") || d.Requests != 4+6 {
		t.Errorf("the join's discovery signal: %+v", d)
	}
	if tot := g.Totals(); tot.Converged != 2 || tot.Changed != 1 || tot.Slowest < lookEvery {
		t.Errorf("totals: %d converged, %d after a change, slowest %s; want 2, 1 and a look's wait at least", tot.Converged, tot.Changed, tot.Slowest)
	}
}

func TestHaltsWhenDiscoveryStaysStale(t *testing.T) {
	l := &looks{members: [][]string{{"cp1=" + older, "cp2=" + older}}, off: [][]string{{"cp1 still advertises g/v1/things"}}}
	g, src := discoveryGuarded(l, time.Second)
	err := after(g, src, "01 remove cp5", "", 0, 1, 200)
	if err == nil || !strings.Contains(err.Error(), SignalDiscovery) || !strings.Contains(err.Error(), "cp1 still advertises g/v1/things") {
		t.Fatalf("a merged discovery advertising what nobody serves past the bound: want a breach of %s saying what, got %v", SignalDiscovery, err)
	}
	if tot := g.Totals(); tot.Converged != 0 {
		t.Errorf("a breach counted as converged: %+v", tot)
	}
}

// A look at which no apiserver answered agrees on nothing: past the bound
// the rollout halts, as on a stale discovery.
func TestHaltsWhenNoApiserverAnswersDiscovery(t *testing.T) {
	l := &looks{members: [][]string{{}}, off: [][]string{nil}}
	g, src := discoveryGuarded(l, time.Second)
	err := after(g, src, "01 remove cp5", "", 0, 1, 200)
	if err == nil || !strings.Contains(err.Error(), "no apiserver answered for its discovery") {
		t.Fatalf("no member at any look: want a breach saying so, got %v", err)
	}
	if tot := g.Totals(); tot.Converged != 0 {
		t.Errorf("no member counted as converged: %+v", tot)
	}
}

func TestDiscoveryIsNotReadAfterABreach(t *testing.T) {
	l := &looks{members: [][]string{{"cp1=" + older}}, off: [][]string{nil}}
	g, src := discoveryGuarded(l, time.Second)
	if err := after(g, src, "01 join", "cp6", 0, 10, 503); err == nil {
		t.Fatal("forwarded requests failing did not halt the rollout")
	}
	if d := g.Table().Steps[0].Signals[4]; l.made != 0 || d.Decision != report.GuardNA || !strings.Contains(d.Value, SignalForwarded) {
		t.Errorf("discovery looked at %d times after a breach, signal %+v", l.made, d)
	}
}
