// Package guard watches a rollout the way the Mixed Version Proxy design
// asks it to be run: after each step it reads the signals of the traffic
// the step met - the share answered 5xx, the forwarded requests that
// failed, false 404s, what forwarding added to a request's latency - and
// the cluster's discovery, and halts the rollout before the next step
// when one crosses its threshold (promise.GuardThresholds). Every
// decision is kept, step by step: the signal table of a report.
package guard

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/traffic"
)

// pLatency is the percentile the latency signal reads, and LatencyFloor
// the fewest samples it is read on: below 100 a p99 is the maximum, and
// one slow request of a busy host would decide it.
const (
	pLatency     = 0.99
	LatencyFloor = 100
)

// The signals.
const (
	Signal5xx       = "5xx-share"
	SignalForwarded = "forwarded-failures"
	SignalFalse404  = "false-404"
	SignalAddedP99  = "forwarded-added-p99"
	SignalDiscovery = "discovery-converged"
)

// Source is where the guard reads the traffic: traffic.Traffic.
type Source interface {
	Ended() ([]traffic.Record, func(phase, target string) bool)
	// Targets are the apiservers streamed to now.
	Targets() map[string]bool
}

// Input says what a Guard watches.
type Input struct {
	Thresholds promise.GuardThresholds
	// Rollout names the rollout in the signal table.
	Rollout string
	// Injected is the breach made on purpose before the rollout, if any.
	Injected string
	// Older and Newer are the versions of the apiservers that lack and
	// that serve the newer-only resource the traffic asks for: a request
	// for it at Older is forwarded, at Newer served where it lives. Empty
	// when the traffic asks for none: no signal of forwarding is read.
	Older, Newer string
	// Discovery, when set, is read after every step: the signal is
	// decided by how long the apiservers' discovery took to agree.
	Discovery Discovery
}

// Guard is a rollout.Guard reading a traffic Source.
type Guard struct {
	in  Input
	src Source

	mu    sync.Mutex
	since time.Time       // the first step's start: what came before is not this rollout's
	taken map[string]bool // phases read
	prev  string          // the node the step before acted on
	// cut is a server of the resource the step before took away: the
	// requests forwarded to it then were cut by the rollout, on purpose.
	cut string
	// Records carried to the next decision, per signal: a step too short
	// to decide on is judged with the next.
	carried map[string][]traffic.Record
	members map[string]string // the apiservers discovery found after the step before, and their versions
	table   report.GuardedRollout
	totals  Totals
}

// Totals are what a Guard read over its whole rollout: the forwarded
// requests and the same request served where the resource lives (what
// the service objective of proxied requests is judged on), and how
// discovery agreed after each step (rollout.discovery.each-step's).
type Totals struct {
	Forwarded, Failed int
	// Latencies of the answered ones, forwarded and served locally.
	ForwardedLatencies, LocalLatencies []time.Duration
	// Converged counts the steps after which discovery agreed within
	// its bound, Changed those of them after which the apiservers that
	// answered, or their versions, were not those of the step before;
	// Slowest is the longest it took.
	Converged, Changed int
	Slowest            time.Duration
}

// Add is t and o pooled.
func (t Totals) Add(o Totals) Totals {
	return Totals{Forwarded: t.Forwarded + o.Forwarded, Failed: t.Failed + o.Failed,
		ForwardedLatencies: append(slices.Clone(t.ForwardedLatencies), o.ForwardedLatencies...),
		LocalLatencies:     append(slices.Clone(t.LocalLatencies), o.LocalLatencies...),
		Converged:          t.Converged + o.Converged, Changed: t.Changed + o.Changed, Slowest: max(t.Slowest, o.Slowest)}
}

// P99s are the p99 latencies of forwarded and local requests, and
// whether each had the samples a p99 needs.
func (t Totals) P99s() (fwd, local time.Duration, ok bool) {
	if len(t.ForwardedLatencies) < LatencyFloor || len(t.LocalLatencies) < LatencyFloor {
		return 0, 0, false
	}
	return traffic.Percentile(t.ForwardedLatencies, pLatency), traffic.Percentile(t.LocalLatencies, pLatency), true
}

// New is a Guard of the rollout in describes, reading src.
func New(in Input, src Source) *Guard {
	return &Guard{in: in, src: src, taken: map[string]bool{}, carried: map[string][]traffic.Record{},
		table: report.GuardedRollout{Rollout: in.Rollout, Injected: in.Injected}}
}

var _ rollout.Guard = (*Guard)(nil)

// After reads every signal over the phases the step's end closed, and
// halts the rollout on the first breach.
func (g *Guard) After(ctx context.Context, done rollout.Step) error {
	records, advertised := g.src.Ended()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.since.IsZero() {
		g.since = done.Start
	}
	// A step that acts on a node expects that node's own requests to fail
	// (its apiserver stops or restarts), while it runs and as the requests
	// it cut short come back after it.
	acted := map[string]bool{done.Node: done.Node != "", g.prev: g.prev != ""}
	g.prev = done.Node
	var fresh []traffic.Record
	for _, r := range records {
		if !g.taken[r.Phase] && !r.Time.Before(g.since) && r.Verb != "watch-event" && !acted[r.Target] {
			fresh = append(fresh, r)
		}
	}
	// A step that takes away a server of the newer-only resource (a
	// rollback removing the newer apiservers, or one of two) cuts the
	// requests its peers forward to it until they stop routing there:
	// what the forwarded signals read in that step and the next is the
	// step's meaning, as a stopped server's own requests are.
	cut := g.cut
	g.cut = ""
	if done.Node != "" && !g.src.Targets()[done.Node] && servedAt(records, done.Node, g.in.Newer) {
		cut, g.cut = done.Node, done.Node
	}
	for _, r := range records {
		g.taken[r.Phase] = true
	}
	signals := g.read(fresh, advertised, cut)
	step := report.GuardStep{Step: done.Name, Signals: append(signals, g.discovery(ctx, signals))}
	g.table.Steps = append(g.table.Steps, step)
	for _, s := range step.Signals {
		if s.Decision == report.GuardBreach {
			g.table.Halted, g.table.HaltedAfter = &s, done.Name
			return fmt.Errorf("%s is %s over %d requests, past its threshold %s", s.Signal, s.Value, s.Requests, s.Threshold)
		}
	}
	return nil
}

// Totals are what the guard has read so far.
func (g *Guard) Totals() Totals {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Totals{}.Add(g.totals)
}

// Table is the signal table so far.
func (g *Guard) Table() report.GuardedRollout {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.table
	t.Steps = append([]report.GuardStep(nil), t.Steps...)
	return t
}

// servedAt says whether node's own stream found it at version v: a
// server of the newer-only resource when v is Newer.
func servedAt(records []traffic.Record, node, v string) bool {
	return v != "" && slices.ContainsFunc(records, func(r traffic.Record) bool { return r.Target == node && r.Server == v })
}

// read decides every signal on a step's fresh records and what earlier
// steps carried. cut, when set, is a server of the resource the step or
// the one before took away: no request for the resource is read, through
// any target (any may have been forwarded to it).
func (g *Guard) read(fresh []traffic.Record, advertised func(phase, target string) bool, cut string) []report.GuardSignal {
	th := g.in.Thresholds
	forwarded := func(r traffic.Record) bool { return cut == "" && isNewAPI(r) && r.Server == g.in.Older }
	all := g.share(Signal5xx, fresh, func(r traffic.Record) bool { return cut == "" || r.Probe != "new-api" },
		func(r traffic.Record) bool { return r.Code >= 500 }, th.Max5xxShare)
	if g.in.Older == "" || g.in.Newer == "" {
		na := func(name string) report.GuardSignal {
			return report.GuardSignal{Signal: name, Value: "no resource only the newer version serves is asked for",
				Threshold: g.threshold(name), Decision: report.GuardNA}
		}
		return []report.GuardSignal{na(SignalForwarded), all, na(SignalFalse404), na(SignalAddedP99)}
	}
	for _, r := range fresh {
		switch {
		case forwarded(r):
			g.totals.Forwarded++
			if r.Code == 0 || r.Code >= 500 {
				g.totals.Failed++
			} else {
				g.totals.ForwardedLatencies = append(g.totals.ForwardedLatencies, r.Latency)
			}
		case isNewAPI(r) && r.Server == g.in.Newer && r.Code != 0:
			g.totals.LocalLatencies = append(g.totals.LocalLatencies, r.Latency)
		}
	}
	// Forwarded first: where both shares breach, the halt names the
	// signal that says more.
	fwd := g.share(SignalForwarded, fresh, forwarded,
		func(r traffic.Record) bool { return r.Code == 0 || r.Code >= 500 }, th.MaxForwardedFailures)
	if cut != "" {
		fwd.Value += fmt.Sprintf("; not read: the rollout took %s, a server of the resource, away", cut)
	}
	return []report.GuardSignal{fwd, all, g.false404(fresh, advertised), g.addedP99(fresh, forwarded)}
}

// isNewAPI is a request for the newer-only resource straight to one
// apiserver (through the load balancer, which answered is not known).
func isNewAPI(r traffic.Record) bool { return r.Probe == "new-api" && r.Target != "lb" }

// share decides a share signal: of the records counted, how many were bad.
// A breach needs the bad ones to be unlikely (below 1-Confidence) were
// the true share at most limit; without one, a sample under MinSample is
// carried to the next step.
func (g *Guard) share(name string, fresh []traffic.Record, counts, bad func(traffic.Record) bool, limit float64) report.GuardSignal {
	sample := g.carried[name]
	for _, r := range fresh {
		if counts(r) {
			sample = append(sample, r)
		}
	}
	n, k := len(sample), 0
	for _, r := range sample {
		if bad(r) {
			k++
		}
	}
	s := report.GuardSignal{Signal: name, Requests: n, Threshold: g.threshold(name), Value: fmt.Sprintf("%d/%d", k, n)}
	if n > 0 {
		s.Value += fmt.Sprintf(" (%.1f%%)", 100*float64(k)/float64(n))
	}
	switch {
	case k > 0 && tailAtLeast(n, k, limit) < 1-g.in.Thresholds.Confidence:
		s.Decision = report.GuardBreach
	case n < g.in.Thresholds.MinSample:
		s.Decision = report.GuardPending
	default:
		s.Decision = report.GuardOK
	}
	g.carry(name, s.Decision, sample)
	return s
}

// carry keeps a pending signal's sample for the next step.
func (g *Guard) carry(name, decision string, sample []traffic.Record) {
	if decision == report.GuardPending {
		g.carried[name] = sample
	} else {
		delete(g.carried, name)
	}
}

// false404 counts the step's 404s for the newer-only resource from an
// apiserver that advertised it throughout the step.
func (g *Guard) false404(fresh []traffic.Record, advertised func(phase, target string) bool) report.GuardSignal {
	n, k := 0, 0
	for _, r := range fresh {
		if r.Probe != "new-api" {
			continue
		}
		n++
		if r.Code == http.StatusNotFound && advertised(r.Phase, r.Target) {
			k++
		}
	}
	s := report.GuardSignal{Signal: SignalFalse404, Requests: n, Value: fmt.Sprint(k), Threshold: g.threshold(SignalFalse404)}
	switch {
	case k > g.in.Thresholds.MaxFalse404:
		s.Decision = report.GuardBreach
	case n == 0:
		s.Decision = report.GuardPending
	default:
		s.Decision = report.GuardOK
	}
	return s
}

// addedP99 compares the p99 latency of answered forwarded requests with
// that of the same request served where the resource lives, once each
// has LatencyFloor samples.
func (g *Guard) addedP99(fresh []traffic.Record, forwarded func(traffic.Record) bool) report.GuardSignal {
	sample := g.carried[SignalAddedP99]
	for _, r := range fresh {
		if isNewAPI(r) && r.Code != 0 && (forwarded(r) || r.Server == g.in.Newer) {
			sample = append(sample, r)
		}
	}
	var fwd, local []time.Duration
	for _, r := range sample {
		if r.Server == g.in.Newer {
			local = append(local, r.Latency)
		} else {
			fwd = append(fwd, r.Latency)
		}
	}
	s := report.GuardSignal{Signal: SignalAddedP99, Requests: len(sample), Threshold: g.threshold(SignalAddedP99),
		Value: fmt.Sprintf("%d forwarded, %d local", len(fwd), len(local))}
	if len(fwd) > 0 && len(local) > 0 {
		// The p50s, shown: a median needs no floor to mean what it says.
		s.Value += "; p50 " + added(traffic.Percentile(fwd, 0.5), traffic.Percentile(local, 0.5))
	}
	if len(fwd) < LatencyFloor || len(local) < LatencyFloor {
		s.Decision = report.GuardPending
		s.Value += fmt.Sprintf("; p99 once %d of each", LatencyFloor)
	} else {
		pf, pl := traffic.Percentile(fwd, pLatency), traffic.Percentile(local, pLatency)
		s.Value = "p99 " + added(pf, pl) + "; " + s.Value
		s.Decision = report.GuardOK
		if pf-pl > g.in.Thresholds.MaxForwardedAddedP99.Duration {
			s.Decision = report.GuardBreach
		}
	}
	g.carry(SignalAddedP99, s.Decision, sample)
	return s
}

// threshold is how the table shows a signal's threshold.
func (g *Guard) threshold(name string) string {
	th := g.in.Thresholds
	switch name {
	case Signal5xx:
		return fmt.Sprintf("<= %g%% at %g%% confidence", 100*th.Max5xxShare, 100*th.Confidence)
	case SignalForwarded:
		return fmt.Sprintf("<= %g%% at %g%% confidence", 100*th.MaxForwardedFailures, 100*th.Confidence)
	case SignalFalse404:
		return fmt.Sprintf("<= %d", th.MaxFalse404)
	case SignalDiscovery:
		return fmt.Sprintf("<= %s", th.MaxDiscoveryConvergence)
	}
	return fmt.Sprintf("<= %s over %d samples each", th.MaxForwardedAddedP99, LatencyFloor)
}

// added is what forwarding added, pf over pl (one percentile of each),
// and the two.
func added(pf, pl time.Duration) string {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	sign := "+"
	if pf < pl {
		sign = ""
	}
	return fmt.Sprintf("%s%s (%s forwarded, %s local)", sign, ms(pf-pl), ms(pf), ms(pl))
}

// tailAtLeast is the probability of k or more successes in n trials of
// probability p: how likely k bad requests of n are if the true share is p.
func tailAtLeast(n, k int, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	lgN, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for i := k; i <= n; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgR, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - lgI - lgR + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return math.Min(sum, 1)
}
