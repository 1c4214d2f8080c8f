package report

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// Soak is what certifications of one pair, run back to back on one
// machine (make soak), add up to promise by promise: how often each was
// passed, failed, waived or could not be judged, and how long each
// certification took. A promise whose outcome differs between runs is a
// flake: a soak finds flakes to root-cause them, never to retry one into
// a pass.
type Soak struct {
	From, To string
	Runs     []SoakRun
	Rows     []SoakRow
}

// SoakRun is one certification of a soak.
type SoakRun struct {
	Dir        string
	Commit     string
	Outcome    promise.Outcome
	Took       time.Duration
	Incomplete string
}

// SoakRow is one promise across the soak's runs of one strategy.
type SoakRow struct {
	Run string // the run's label: its strategy, and its shard if split
	ID  promise.ID
	// Outcomes are the promise's outcome in each certification, in the
	// soak's order; "" where the certification holds no such run.
	Outcomes []promise.Outcome
	// Failures are the reasons of each failure and error, "run N: ...".
	Failures []string
}

// Count is how many runs gave the promise outcome o.
func (r SoakRow) Count(o promise.Outcome) int {
	n := 0
	for _, got := range r.Outcomes {
		if got == o {
			n++
		}
	}
	return n
}

// Missing is how many certifications hold no run that judged it.
func (r SoakRow) Missing() int { return r.Count("") }

// Varies says whether the promise came out differently between runs:
// a flake, or a waiver's cause that comes and goes.
func (r SoakRow) Varies() bool {
	for _, o := range r.Outcomes {
		if o != r.Outcomes[0] {
			return true
		}
	}
	return false
}

// Failed says whether any run failed the promise or could not judge it,
// or any certification lacks the run.
func (r SoakRow) Failed() bool {
	return r.Count(promise.Fail) > 0 || r.Count(promise.Error) > 0 || r.Missing() > 0
}

// NewSoak adds up results, each the results.json found in dirs[i]: the
// same pair, each whole (a shard is a part of a certification, not one).
func NewSoak(dirs []string, results []*Results) (*Soak, error) {
	if len(results) == 0 || len(dirs) != len(results) {
		return nil, errors.New("a soak needs the results of at least one certification, each with its folder")
	}
	s := &Soak{From: results[0].From, To: results[0].To}
	var errs []string
	rows := map[string]*SoakRow{}
	key := func(run string, id promise.ID) string { return run + "\x00" + string(id) }
	for i, r := range results {
		if r.From != s.From || r.To != s.To {
			errs = append(errs, fmt.Sprintf("%s certifies %s -> %s, not %s -> %s: a soak repeats one pair", dirs[i], r.From, r.To, s.From, s.To))
		}
		took := time.Duration(0)
		if !r.Finished.IsZero() {
			took = r.Finished.Sub(r.Started)
		}
		s.Runs = append(s.Runs, SoakRun{Dir: dirs[i], Commit: r.Tool.Commit, Outcome: r.Outcome, Took: took, Incomplete: r.Incomplete})
		for _, run := range r.Runs {
			for _, p := range run.Promises {
				k := key(run.Label(), p.ID)
				row := rows[k]
				if row == nil {
					row = &SoakRow{Run: run.Label(), ID: p.ID, Outcomes: make([]promise.Outcome, len(results))}
					rows[k] = row
				}
				row.Outcomes[i] = p.Outcome
				if p.Outcome.Fails() {
					reason := p.Reason
					if len(reason) > 300 {
						reason = reason[:300] + "..."
					}
					row.Failures = append(row.Failures, fmt.Sprintf("run %d: %s", i+1, reason))
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	for _, row := range rows {
		s.Rows = append(s.Rows, *row)
	}
	sort.Slice(s.Rows, func(a, b int) bool {
		ra, rb := s.Rows[a], s.Rows[b]
		if ra.Run != rb.Run {
			return ra.Run < rb.Run
		}
		return ra.ID < rb.ID
	})
	return s, nil
}

// Passed says whether every certification of the soak passed.
func (s *Soak) Passed() bool { return s.Failed() == 0 }

// Failed is how many certifications of the soak did not pass.
func (s *Soak) Failed() int {
	n := 0
	for _, r := range s.Runs {
		if r.Outcome != promise.Pass {
			n++
		}
	}
	return n
}

// Markdown is the soak's table: each certification with its outcome and
// time, then every promise that did not come out the same in every run
// or failed in any, then how the rest came out.
func (s *Soak) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Soak: %s -> %s, %d certification(s)\n\n", s.From, s.To, len(s.Runs))
	b.WriteString("| # | outcome | took | commit | results |\n|---|---|---|---|---|\n")
	var took []time.Duration
	for i, r := range s.Runs {
		outcome := string(r.Outcome)
		if r.Incomplete != "" {
			outcome += " (" + r.Incomplete + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", i+1, outcome, r.Took.Round(time.Second), short(r.Commit), r.Dir)
		took = append(took, r.Took)
	}
	slices.Sort(took)
	fmt.Fprintf(&b, "\nTime per certification: min %s, median %s, max %s.\n",
		took[0].Round(time.Second), took[len(took)/2].Round(time.Second), took[len(took)-1].Round(time.Second))

	cols := []promise.Outcome{promise.Pass, promise.Waived, promise.Fail, promise.Error, promise.NotApplicable, promise.NotSelected}
	header := "| run | promise | " + strings.Join(outcomeNames(cols), " | ") + " | missing |\n|---|---|" + strings.Repeat("---|", len(cols)+1) + "\n"
	line := func(r SoakRow) string {
		cells := []string{r.Run, "`" + string(r.ID) + "`"}
		for _, o := range cols {
			cells = append(cells, fmt.Sprint(r.Count(o)))
		}
		cells = append(cells, fmt.Sprint(r.Missing()))
		return "| " + strings.Join(cells, " | ") + " |\n"
	}
	var odd, same []SoakRow
	for _, r := range s.Rows {
		if r.Varies() || r.Failed() {
			odd = append(odd, r)
		} else {
			same = append(same, r)
		}
	}
	if len(odd) == 0 {
		b.WriteString("\nEvery promise came out the same in every run, and none failed.\n")
	} else {
		fmt.Fprintf(&b, "\n## %d promise(s) that varied between runs or failed in one\n\n%s", len(odd), header)
		for _, r := range odd {
			b.WriteString(line(r))
		}
		for _, r := range odd {
			for _, f := range r.Failures {
				fmt.Fprintf(&b, "\n- %s (%s) %s", r.ID, r.Run, f)
			}
		}
		b.WriteString("\n")
	}
	if len(same) > 0 {
		fmt.Fprintf(&b, "\n## %d promise(s) the same in every run\n\n%s", len(same), header)
		for _, r := range same {
			b.WriteString(line(r))
		}
	}
	return b.String()
}

func outcomeNames(os []promise.Outcome) []string {
	var out []string
	for _, o := range os {
		out = append(out, string(o))
	}
	return out
}

// short is a commit as git's short form shows it, +dirty kept.
func short(commit string) string {
	rev, dirty, _ := strings.Cut(commit, "+")
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty != "" {
		return rev + "+" + dirty
	}
	return rev
}
