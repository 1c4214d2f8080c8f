// Package traffic runs steady request streams against a cluster during a
// transition - through the load balancer and against each apiserver
// directly - and records every request, so a summary can say what was lost,
// what failed and how slow it was, phase by phase.
package traffic

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/report"
)

// Record is one request.
type Record struct {
	Time    time.Time     `json:"time"`
	Phase   string        `json:"phase"`
	Target  string        `json:"target"`  // "lb" or a node name
	Conn    string        `json:"conn"`    // the stream's connections: Reused or New
	Server  string        `json:"server"`  // the target's version, as last seen
	Verb    string        `json:"verb"`    // create, get, list, watch-event
	Object  string        `json:"object"`  // resource, and name where there is one
	Code    int           `json:"code"`    // HTTP status; 0 when no response came
	Latency time.Duration `json:"latency"` // until the response
	Err     string        `json:"err,omitempty"`
	// Probe names what the request checks: "write", "read", "new-api".
	Probe string `json:"probe"`
	// AuditID is the Audit-Id the apiserver answered with: where to find
	// the request in the audit logs.
	AuditID string `json:"auditID,omitempty"`
	// Fault says the request was under way while a fault was injected
	// on purpose (Traffic.Fault).
	Fault bool `json:"fault,omitempty"`
}

// Summary is what a transition did to the traffic.
type Summary struct {
	Requests int
	// Acked counts the acknowledged writes (201): what no-lost-writes and
	// no-missed-watch-events look for, each.
	Acked int
	// Acknowledged writes (201) that a final list does not find.
	LostWrites []string
	// Acknowledged writes that a watch through the load balancer never delivered.
	MissedWatchEvents []string
	// FalseNotFound counts 404s for a resource some apiserver serves, and
	// FalseNotFoundRecords are those requests, as evidence.
	FalseNotFound        int
	FalseNotFoundRecords []Record
	// NotFound are those requests explained: which apiserver answered and
	// what it logged (ExplainNotFound).
	NotFound []NotFound
	// Forbidden are the requests denied (403), through any target, and
	// what the audit logs say of each: the traffic's user may do all it
	// asks, so every 403 is a request the cluster failed to serve.
	Forbidden []Forbidden
	// NewAPIProbed says whether the traffic asked for a collection only
	// newer apiservers serve: without it, no 404 can be found false.
	NewAPIProbed bool
	// NewAPIChecked counts the answers to those requests through a target
	// that advertised the collection for the whole phase: the requests a
	// false 404 could be among.
	NewAPIChecked int
	Phases        []PhaseSummary
	// Backends is the disruption table: each backend through the whole
	// traffic.
	Backends []report.Backend
	// Steps are the load balancer's requests phase by phase.
	Steps []report.StepLatency
}

// PhaseSummary is one phase's error counts and latencies.
type PhaseSummary struct {
	Phase         string
	Requests      int
	ServerErrors  int // 5xx
	NoResponse    int // connection refused, reset, timeout
	P50, P99      time.Duration
	FalseNotFound int
	// Checked counts the answered requests for the new API through a
	// target that advertised it from the phase's start to its end.
	Checked       int
	CodesByTarget map[string]map[int]int
}

// Summarize computes the per-phase view of records. advertised says
// whether a target advertised the new API from the phase's start to its
// end: a 404 for it through that target there is a false 404.
func Summarize(records []Record, advertised func(phase, target string) bool) []PhaseSummary {
	byPhase := map[string][]Record{}
	var order []string
	for _, r := range records {
		if _, ok := byPhase[r.Phase]; !ok {
			order = append(order, r.Phase)
		}
		byPhase[r.Phase] = append(byPhase[r.Phase], r)
	}
	var out []PhaseSummary
	for _, phase := range order {
		rs := byPhase[phase]
		s := PhaseSummary{Phase: phase, Requests: len(rs), CodesByTarget: map[string]map[int]int{}}
		for _, r := range rs {
			if s.CodesByTarget[r.Target] == nil {
				s.CodesByTarget[r.Target] = map[int]int{}
			}
			s.CodesByTarget[r.Target][r.Code]++
			switch {
			case r.Code == 0:
				s.NoResponse++
			case r.Code >= 500:
				s.ServerErrors++
			case r.Code == 404 && r.Probe == "new-api" && advertised(phase, r.Target):
				s.FalseNotFound++
			}
			if r.Code != 0 && r.Probe == "new-api" && advertised(phase, r.Target) {
				s.Checked++
			}
		}
		s.P50, s.P99 = answeredLatencies(rs)
		out = append(out, s)
	}
	return out
}

// answeredLatencies are the p50 and p99 latencies of the records that
// got a response.
func answeredLatencies(rs []Record) (p50, p99 time.Duration) {
	var lat []time.Duration
	for _, r := range rs {
		if r.Code != 0 {
			lat = append(lat, r.Latency)
		}
	}
	return Percentile(lat, 0.50), Percentile(lat, 0.99)
}

// Percentile is the p-th (0 to 1) of d, nearest below; 0 for none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), d...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

// String renders the summary as a table a person reads in a test log.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests %d, acknowledged writes lost %d, watch events missed %d, false 404s %d\n",
		s.Requests, len(s.LostWrites), len(s.MissedWatchEvents), s.FalseNotFound)
	fmt.Fprintf(&b, "%-60s %8s %6s %8s %9s %9s\n", "phase", "requests", "5xx", "no-resp", "p50", "p99")
	for _, p := range s.Phases {
		fmt.Fprintf(&b, "%-60s %8d %6d %8d %9s %9s\n", truncate(p.Phase, 60), p.Requests, p.ServerErrors, p.NoResponse,
			p.P50.Round(100*time.Microsecond), p.P99.Round(100*time.Microsecond))
	}
	fmt.Fprintf(&b, "%-40s %-7s %8s %6s %12s %9s %9s\n", "backend", "conn", "requests", "failed", "unavailable", "p50", "p99")
	for _, d := range s.Backends {
		fmt.Fprintf(&b, "%-40s %-7s %8d %6d %12s %9s %9s\n", truncate(d.Target, 40), d.Connections(), d.Requests, d.Failed,
			d.Unavailable.Round(10*time.Millisecond), d.P50.Round(100*time.Microsecond), d.P99.Round(100*time.Microsecond))
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
