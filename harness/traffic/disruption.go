package traffic

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
)

// failed says a request was not served: no response, a 5xx, or a 403
// (the traffic's user may do all it asks: rollout.no-false-403).
func failed(r Record) bool { return r.Code == 0 || r.Code >= 500 || r.Code == http.StatusForbidden }

// Disruption is the table of how each backend fared through records, on
// each kind of connection: requests, failures, codes, latencies, and the
// longest stretch it was unavailable. The load balancer ("lb") comes
// first, then the apiservers by name; reused connections before new.
// Requests made while a fault was injected on purpose are left out: what
// a fault does to them is its own promises' to judge (a peer killed
// answers 503 until its lease expires), not a rollout's disruption;
// Steps still shows their phases.
func Disruption(records []Record) []report.Backend {
	byStream := map[stream][]Record{}
	for _, r := range records {
		if r.Verb == "watch-event" || r.Fault {
			continue // delivered events, not requests; a fault's
		}
		byStream[stream{r.Target, r.Conn}] = append(byStream[stream{r.Target, r.Conn}], r)
	}
	streams := slices.Collect(maps.Keys(byStream))
	slices.SortFunc(streams, func(a, b stream) int {
		if (a.target == "lb") != (b.target == "lb") {
			if a.target == "lb" {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.target, b.target), -cmp.Compare(a.conn, b.conn))
	})
	var out []report.Backend
	for _, st := range streams {
		rs := byStream[st]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Time.Before(rs[j].Time) })
		b := report.Backend{Target: st.target, Conn: st.conn, Requests: len(rs), Codes: map[int]int{}}
		var down time.Time // when the current stretch of failures began
		var last time.Time
		for _, r := range rs {
			b.Codes[r.Code]++
			if failed(r) {
				b.Failed++
				if down.IsZero() {
					down = r.Time
				}
				last = r.Time
				continue
			}
			if !down.IsZero() {
				b.Unavailable = max(b.Unavailable, r.Time.Sub(down))
				down = time.Time{}
			}
		}
		if !down.IsZero() {
			b.Unavailable = max(b.Unavailable, last.Sub(down))
		}
		b.P50, b.P99 = answeredLatencies(rs)
		out = append(out, b)
	}
	return out
}

// Steps is how the requests through the load balancer fared in each
// phase of the traffic (the rollout's steps), on each kind of connection:
// requests, failures, and the latencies of those that got a response. In
// the order the phases began, reused connections before new.
func Steps(records []Record) []report.StepLatency {
	type key struct{ phase, conn string }
	var order []key
	by := map[key][]Record{}
	for _, r := range records {
		if r.Target != "lb" || r.Verb == "watch-event" {
			continue
		}
		k := key{r.Phase, r.Conn}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	first := map[string]int{}
	for i, k := range order {
		if _, ok := first[k.phase]; !ok {
			first[k.phase] = i
		}
	}
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(first[a.phase], first[b.phase]), -cmp.Compare(a.conn, b.conn))
	})
	var out []report.StepLatency
	for _, k := range order {
		s := report.StepLatency{Phase: k.phase, Conn: k.conn, Requests: len(by[k])}
		for _, r := range by[k] {
			if failed(r) {
				s.Failed++
			}
			if s.First.IsZero() || r.Time.Before(s.First) {
				s.First = r.Time
			}
			if r.Time.After(s.Last) {
				s.Last = r.Time
			}
		}
		s.P50, s.P99 = answeredLatencies(by[k])
		out = append(out, s)
	}
	return out
}

// DisruptionVerdict holds the table to rollout.disruption-budget: through
// the load balancer, on each kind of connection, at most budget.MaxFailed
// of the requests failed and no stretch of unavailability outlasted its
// bound. The apiservers addressed directly are measured, not judged: a
// rollout takes each of them away by design.
func DisruptionVerdict(table []report.Backend, budget promise.Budget) promise.Verdict {
	const id = "rollout.disruption-budget"
	ev := []string{"budget: " + budget.String()}
	var breaches []string
	judged := map[string]bool{}
	for _, b := range table {
		if b.Target != "lb" {
			continue
		}
		conn := b.Connections()
		judged[conn] = true
		share := float64(b.Failed) / float64(max(b.Requests, 1))
		unavailable := b.Unavailable.Round(10 * time.Millisecond)
		ev = append(ev, fmt.Sprintf("lb, %s connections: %d of %d requests failed (%.2f%%), longest unavailable %s, codes %v",
			conn, b.Failed, b.Requests, 100*share, unavailable, b.Codes))
		bound := map[string]time.Duration{Reused: budget.MaxUnavailableReused, New: budget.MaxUnavailable}[conn]
		switch {
		case b.Requests < MinRequests:
			breaches = append(breaches, fmt.Sprintf("%d requests on %s connections through the load balancer, fewer than the %d a verdict needs", b.Requests, conn, MinRequests))
		case share > budget.MaxFailed:
			breaches = append(breaches, fmt.Sprintf("%.2f%% of requests on %s connections through the load balancer failed (%d of %d), over the budget of %g%%",
				100*share, conn, b.Failed, b.Requests, 100*budget.MaxFailed))
		}
		if bound > 0 && b.Unavailable > bound {
			breaches = append(breaches, fmt.Sprintf("%s connections through the load balancer were unavailable for %s, over the bound of %s", conn, unavailable, bound))
		}
	}
	for _, conn := range []string{Reused, New} {
		if !judged[conn] {
			breaches = append(breaches, fmt.Sprintf("no request went through the load balancer on %s connections", conn))
		}
	}
	if len(breaches) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: strings.Join(breaches, "; ")}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}
