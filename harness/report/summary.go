package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// outcomes in the order a reader needs them: what failed first.
var outcomes = promise.Outcomes

// Summary renders the results as Markdown for a CI step summary: the
// verdict, counts, then the failures, waivers and skips with their reasons,
// and every promise by run.
func (r *Results) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# skewer certify %s -> %s: %s\n\n", r.From, r.To, strings.ToUpper(string(r.Outcome)))
	fmt.Fprintf(&b, "**Coverage**: %s%s.\n\n", r.Coverage, map[bool]string{true: "; --strict: every waiver refused"}[r.Strict])
	fmt.Fprintf(&b, "%s; %s, %s to %s (skewer %s, kind %s, %s)\n", r.countLine(), strategies(r),
		r.Started.UTC().Format("2006-01-02 15:04:05Z"), r.Finished.UTC().Format("15:04:05Z"), r.Tool.Version, r.Tool.Kind, r.Tool.Go)
	if r.Incomplete != "" {
		fmt.Fprintf(&b, "\n**Incomplete**: %s\n", r.Incomplete)
	}
	if p := r.provenance(); p != "" {
		fmt.Fprintf(&b, "\n%s\n", p)
	}
	b.WriteString(r.givenBinaries())
	for _, o := range outcomes[:len(outcomes)-1] {
		var lines []string
		for _, run := range r.Runs {
			for _, p := range run.Promises {
				if p.Outcome != o || r.elsewhere(run, p.Verdict) {
					continue
				}
				line := fmt.Sprintf("- **%s** (%s): %s", p.ID, run.Label(), cell(p.Reason))
				if p.Reference != "" {
					line += " [upstream](" + p.Reference + ")"
				}
				if p.Waiver != "" {
					line += " (waiver " + p.Waiver + ")"
				}
				lines = append(lines, line)
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "\n## %s\n\n%s\n", heading[o], strings.Join(lines, "\n"))
		}
	}
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "\n## %s on %s\n\n| promise | outcome | statement |\n|---|---|---|\n", run.Label(), run.Cluster)
		promises, others := r.own(run)
		for _, p := range promises {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", p.ID, p.Outcome, cell(p.Statement))
		}
		if others > 0 {
			fmt.Fprintf(&b, "\n%d more promises are another shard's to judge.\n", others)
		}
		if run.Memory != nil {
			fmt.Fprintf(&b, "\nMemory (%s): %s.\n", run.Label(), run.Memory)
		}
		b.WriteString(trafficSummary(run))
		b.WriteString(guardSummary(run))
		b.WriteString(canarySummary(run))
	}
	return b.String()
}

// codes renders status counts in order, "0" as "none" (no response).
func codes(c map[int]int) string {
	keys := make([]int, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		name := strconv.Itoa(k)
		if k == 0 {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s: %d", name, c[k]))
	}
	return strings.Join(parts, ", ")
}

// provenance says in a line what the verdicts were reached on.
func (r *Results) provenance() string {
	var parts []string
	if h := r.Host; h != nil {
		parts = append(parts, fmt.Sprintf("host: Linux %s, cgroup %s, %d cores, Docker %s", h.Kernel, h.Cgroup, h.Cores, h.Docker))
	}
	for _, i := range r.Images {
		part := fmt.Sprintf("%s: `%s` %s", i.Version, i.Ref, shortID(i.ID))
		if len(i.FeatureGates) > 0 {
			part += fmt.Sprintf(" (apiserver feature gates %v)", i.FeatureGates)
		}
		if g := i.Given; g != nil && g.Kind != "node-image" {
			part += fmt.Sprintf(" (built around the %s given)", g.What())
		} else if g != nil {
			part += " (given)"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// givenBinaries lists, for every version a vendor brought as binaries,
// the digest of each: what the certification was reached on.
func (r *Results) givenBinaries() string {
	var b strings.Builder
	for _, i := range r.Images {
		if i.Given == nil || len(i.Given.Binaries) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## Given builds\n\n| version | binary | sha256 |\n|---|---|---|\n")
		}
		if i.Given.SHA256 != "" {
			fmt.Fprintf(&b, "| %s | (the tarball) | `%s` |\n", i.Version, i.Given.SHA256)
		}
		names := make([]string, 0, len(i.Given.Binaries))
		for n := range i.Given.Binaries {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "| %s | %s | `%s` |\n", i.Version, n, i.Given.Binaries[n])
		}
	}
	return b.String()
}

func shortID(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}

var heading = map[promise.Outcome]string{promise.Fail: "Failed", promise.Error: "Could not be judged (error: counts as a failure)",
	promise.Waived:        "Waived (documented upstream behaviour, the cause found in the evidence)",
	promise.NotApplicable: "Not applicable (the input rules it out)", promise.NotSelected: "Not selected (--only, --skip)"}

// countLine is how many verdicts had each outcome, in the reader's order.
func (r *Results) countLine() string {
	c := r.Counts()
	var parts []string
	for _, o := range outcomes {
		parts = append(parts, fmt.Sprintf("%d %s", c[o], o))
	}
	return strings.Join(parts, ", ")
}

func strategies(r *Results) string {
	var s []string
	for _, run := range r.Runs {
		s = append(s, run.Label())
	}
	return strings.Join(s, " and ")
}

// cell keeps a text on one Markdown table line.
func cell(s string) string {
	return strings.NewReplacer("\n", " ", "|", `\|`).Replace(s)
}

// trafficSummary is run's disruption table and its load balancer's
// requests step by step, for summary.md.
func trafficSummary(run Run) string {
	var b strings.Builder
	if len(run.Disruption) > 0 {
		fmt.Fprintf(&b, "\n### Disruption (%s)\n\n| backend | connections | requests | failed | longest unavailable | p50 | p99 | codes |\n|---|---|---|---|---|---|---|---|\n", run.Label())
		for _, d := range run.Disruption {
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s |\n", d.Target, d.Connections(), d.Requests, d.Failed,
				d.Unavailable.Round(10*time.Millisecond), d.P50.Round(100*time.Microsecond), d.P99.Round(100*time.Microsecond), codes(d.Codes))
		}
	}
	if len(run.Steps) > 0 {
		fmt.Fprintf(&b, "\n### Through the load balancer, step by step (%s)\n\n| step | connections | requests | failed | p50 | p99 |\n|---|---|---|---|---|---|\n", run.Label())
		for _, st := range run.Steps {
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s |\n", cell(st.Phase), st.Conn, st.Requests, st.Failed,
				st.P50.Round(100*time.Microsecond), st.P99.Round(100*time.Microsecond))
		}
	}
	return b.String()
}
