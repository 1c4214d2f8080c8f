package traffic

import (
	"fmt"
	"sort"
	"time"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/report"
)

// failed says a request was not served: no response, or a 5xx.
func failed(r Record) bool { return r.Code == 0 || r.Code >= 500 }

// Disruption is the table of how each backend fared through records:
// requests, failures, codes, latencies, and the longest stretch it was
// unavailable. The load balancer ("lb") comes first, then the apiservers
// by name.
func Disruption(records []Record) []report.Backend {
	byTarget := map[string][]Record{}
	for _, r := range records {
		if r.Verb == "watch-event" {
			continue // delivered events, not requests
		}
		byTarget[r.Target] = append(byTarget[r.Target], r)
	}
	targets := make([]string, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	sort.Slice(targets, func(i, j int) bool {
		if (targets[i] == "lb") != (targets[j] == "lb") {
			return targets[i] == "lb"
		}
		return targets[i] < targets[j]
	})
	var out []report.Backend
	for _, t := range targets {
		rs := byTarget[t]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Time.Before(rs[j].Time) })
		b := report.Backend{Target: t, Requests: len(rs), Codes: map[int]int{}}
		var lat []time.Duration
		var down time.Time // when the current stretch of failures began
		var last time.Time
		for _, r := range rs {
			b.Codes[r.Code]++
			if r.Code != 0 {
				lat = append(lat, r.Latency)
			}
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
		b.P50, b.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
		out = append(out, b)
	}
	return out
}

// MaxFailedThroughLB is the default budget of rollout.disruption-budget:
// the share of requests through the load balancer that may fail (5xx or
// no response) while control planes are replaced, KEP-4020's objective of
// 99% answered without a 5xx.
const MaxFailedThroughLB = 0.01

// DisruptionVerdict holds the table to rollout.disruption-budget: through
// the load balancer, at most maxFailed of the requests failed. The
// apiservers addressed directly are measured, not judged: a rollout takes
// each of them away by design.
func DisruptionVerdict(table []report.Backend, maxFailed float64) certify.Verdict {
	const id = "rollout.disruption-budget"
	for _, b := range table {
		if b.Target != "lb" {
			continue
		}
		share := float64(b.Failed) / float64(max(b.Requests, 1))
		ev := []string{fmt.Sprintf("lb: %d of %d requests failed (%.2f%%), longest unavailable %s, codes %v",
			b.Failed, b.Requests, 100*share, b.Unavailable.Round(10*time.Millisecond), b.Codes)}
		if b.Requests < MinRequests {
			return certify.Verdict{ID: id, Outcome: certify.Fail, Evidence: ev,
				Reason: fmt.Sprintf("%d requests through the load balancer, fewer than the %d a verdict needs", b.Requests, MinRequests)}
		}
		if share > maxFailed {
			return certify.Verdict{ID: id, Outcome: certify.Fail, Evidence: ev,
				Reason: fmt.Sprintf("%.2f%% of requests through the load balancer failed (%d of %d), over the budget of %.2f%%; longest unavailable %s",
					100*share, b.Failed, b.Requests, 100*maxFailed, b.Unavailable.Round(10*time.Millisecond))}
		}
		return certify.Verdict{ID: id, Outcome: certify.Pass, Evidence: ev}
	}
	return certify.Verdict{ID: id, Outcome: certify.Fail, Reason: "no request went through the load balancer"}
}
