package report

import (
	_ "embed"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

//go:embed report.html.tmpl
var htmlTemplate string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"area":  promise.ID.Area,
	"join":  strings.Join,
	"codes": codes,
	"dur":   func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() },
	"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"took":  func(a, b time.Time) string { return b.Sub(a).Round(time.Second).String() },
}).Parse(htmlTemplate))

// bar is one phase on a run's timeline, placed in percent of the run.
type bar struct {
	Phase
	Left, Width float64
	Took        string
}

// tick is one event on a run's timeline, placed in percent of the run.
type tick struct {
	Event
	Left float64
}

type runView struct {
	Run
	Bars  []bar
	Ticks []tick
	// Promises are what the run judged (or could not), failures first,
	// then errors, waivers and passes; NotJudged what it does not judge
	// (not applicable, not selected), shown apart; both less those
	// another shard's run judges (Elsewhere counts them).
	Promises, NotJudged []Result
	Elsewhere           int
}

// firstThingsFirst orders a run's verdicts as a release manager reads
// them - what failed, what could not be judged, what was waived, what
// passed, each by ID - and puts apart what the run does not judge.
func firstThingsFirst(ps []Result) (judged, notJudged []Result) {
	rank := map[promise.Outcome]int{promise.Fail: 0, promise.Error: 1, promise.Waived: 2, promise.Pass: 3}
	for _, p := range ps {
		if _, ok := rank[p.Outcome]; ok {
			judged = append(judged, p)
		} else {
			notJudged = append(notJudged, p)
		}
	}
	sort.SliceStable(judged, func(a, b int) bool { return rank[judged[a].Outcome] < rank[judged[b].Outcome] })
	return judged, notJudged
}

// HTML writes report.html: one page with no outside resource (styles and
// the outcome filter inline), the verdict, each run's timeline of phases,
// and every promise with its reason, reference, evidence and measures.
func (r *Results) HTML(w io.Writer) error {
	var runs []runView
	for _, run := range r.Runs {
		bs, ticks := bars(run.Phases, run.Events)
		v := runView{Run: run, Bars: bs, Ticks: ticks}
		own, elsewhere := r.own(run)
		v.Promises, v.NotJudged = firstThingsFirst(own)
		v.Elsewhere = elsewhere
		runs = append(runs, v)
	}
	return page.Execute(w, map[string]any{"R": r, "Runs": runs, "Outcomes": outcomes, "Counts": r.countLine()})
}

// bars places phases, and events as ticks, on a line from the first
// phase's start to the last one's end.
func bars(phases []Phase, events []Event) ([]bar, []tick) {
	if len(phases) == 0 {
		return nil, nil
	}
	start, end := phases[0].Start, phases[0].End
	for _, p := range phases {
		if p.Start.Before(start) {
			start = p.Start
		}
		if p.End.After(end) {
			end = p.End
		}
	}
	total := end.Sub(start).Seconds()
	if total <= 0 {
		total = 1
	}
	var out []bar
	for _, p := range phases {
		left := p.Start.Sub(start).Seconds() / total * 100
		width := max(p.End.Sub(p.Start).Seconds()/total*100, 0.5)
		out = append(out, bar{Phase: p, Left: round(left), Width: round(width), Took: p.End.Sub(p.Start).Round(time.Second).String()})
	}
	var ticks []tick
	for _, e := range events {
		ticks = append(ticks, tick{Event: e, Left: round(min(max(e.Time.Sub(start).Seconds()/total*100, 0), 100))})
	}
	return out, ticks
}

func round(f float64) float64 { return math.Round(f*100) / 100 }
