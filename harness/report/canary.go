package report

import (
	"fmt"
	"strings"
)

// Canary is a migration's canary compared side by side: Pods of the
// legacy template (helpers as regular containers) and of the native one
// (the same helpers as native sidecars, as the migration makes them),
// created at once on the same nodes, metric by metric, each with the stop
// condition that would halt the migration.
type Canary struct {
	// Nodes are where both templates' Pods ran, and Pods how many of each.
	Nodes []string    `json:"nodes"`
	Pods  int         `json:"pods"`
	Rows  []CanaryRow `json:"rows"`
}

// CanaryRow is one metric of both templates.
type CanaryRow struct {
	Metric string `json:"metric"`
	Legacy string `json:"legacy"`
	Native string `json:"native"`
	// StopCondition is the bound the native figure is held to.
	StopCondition string `json:"stopCondition"`
	Breached      bool   `json:"breached"`
}

// Breaches are the rows whose stop condition the native template breached.
func (c Canary) Breaches() []string {
	var out []string
	for _, r := range c.Rows {
		if r.Breached {
			out = append(out, fmt.Sprintf("%s: native %s, legacy %s, stop condition %s", r.Metric, r.Native, r.Legacy, r.StopCondition))
		}
	}
	return out
}

// canarySummary is run's canary for summary.md: a row a metric.
func canarySummary(run Run) string {
	c := run.Canary
	if c == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Sidecar canary (%s): %d Pods of each template on %s\n\n| metric | legacy | native | stop condition | |\n|---|---|---|---|---|\n",
		run.Label(), c.Pods, strings.Join(c.Nodes, ", "))
	for _, r := range c.Rows {
		breach := ""
		if r.Breached {
			breach = "**breached**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(r.Metric), cell(r.Legacy), cell(r.Native), cell(r.StopCondition), breach)
	}
	return b.String()
}
