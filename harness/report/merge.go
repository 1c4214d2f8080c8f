package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Merge joins the results of one certification split across machines
// (certify --shard, a matrix job each) into the results of the whole:
// every shard's runs, each still named by its shard and cluster, with
// the coverage and the outcome counted over all of them as for a
// certification run in one piece. A promise no shard judged stays
// unjudged and the coverage says so; a shard cut short makes the whole
// incomplete. A strategy may come whole (run without --shard) when no
// other input holds a run of it: the in-place run beside the shards of
// the surge run. Results that are not parts of one certification -
// another pair, build, budget or strictness, node images that differ, a
// shard given twice, a strategy both whole and in shards - are refused:
// their verdicts do not add up to one.
func Merge(shards ...*Results) (*Results, error) {
	if len(shards) == 0 {
		return nil, errors.New("no results to merge")
	}
	first := shards[0]
	var errs []string
	type origin struct {
		shard string
		input int
	}
	byStrategy := map[string][]origin{}
	var incomplete []string
	merged := &Results{Schema: SchemaID, Tool: first.Tool, From: first.From, To: first.To, Started: first.Started,
		Strict: first.Strict, Budget: first.Budget, GuardThresholds: first.GuardThresholds, Host: first.Host, Images: first.Images}
	for i, s := range shards {
		for _, d := range differences(first, s) {
			errs = append(errs, fmt.Sprintf("input %d is not a shard of the same certification as input 1: %s", i+1, d))
		}
		if s.Host == nil || merged.Host == nil || *s.Host != *merged.Host {
			merged.Host = nil // shards ran on different machines: none speaks for all
		}
		if len(s.Runs) == 0 {
			errs = append(errs, fmt.Sprintf("input %d holds no run", i+1))
		}
		for _, run := range s.Runs {
			for _, o := range byStrategy[run.Strategy] {
				switch {
				case o.shard == run.Shard:
					errs = append(errs, fmt.Sprintf("inputs %d and %d both hold the %s run", o.input, i+1, run.Label()))
				case o.shard == "" || run.Shard == "":
					errs = append(errs, fmt.Sprintf("inputs %d and %d both judge the %s run's promises: one holds it whole", o.input, i+1, run.Strategy))
				}
			}
			byStrategy[run.Strategy] = append(byStrategy[run.Strategy], origin{run.Shard, i + 1})
			merged.Runs = append(merged.Runs, run)
		}
		if s.Incomplete != "" {
			incomplete = append(incomplete, fmt.Sprintf("%s: %s", shardsOf(s), s.Incomplete))
		}
		if s.Started.Before(merged.Started) {
			merged.Started = s.Started
		}
		merged.Finished = later(merged.Finished, s.Finished)
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; ")) // one line: a CLI's bad input
	}
	merged.Incomplete = strings.Join(incomplete, "; ")
	if err := merged.Finish(merged.Finished); err != nil {
		return nil, err
	}
	return merged, nil
}

// differences says in what b is not a shard of the certification a is.
func differences(a, b *Results) []string {
	var out []string
	differ := func(what string, x, y any) {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		if string(jx) != string(jy) {
			out = append(out, fmt.Sprintf("its %s: %s, not %s", what, jy, jx))
		}
	}
	differ("pair", a.From+" -> "+a.To, b.From+" -> "+b.To)
	differ("skewer", a.Tool, b.Tool)
	differ("--strict", a.Strict, b.Strict)
	differ("budget", a.Budget, b.Budget)
	differ("guard thresholds", a.GuardThresholds, b.GuardThresholds)
	differ("node images", a.Images, b.Images)
	return out
}

// shardsOf names the runs a results file holds.
func shardsOf(r *Results) string {
	var s []string
	for _, run := range r.Runs {
		s = append(s, run.Label())
	}
	return strings.Join(s, " and ")
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
