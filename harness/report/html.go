package report

import (
	_ "embed"
	"fmt"
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

// mark is a labelled time on a run's timeline axis, in percent of the run.
type mark struct {
	Left  float64
	Label string
}

type runView struct {
	Run
	// Lanes are the run's timeline, one labelled line each: the phases,
	// every node a rollout's step changed, the traffic through the load
	// balancer step by step (one lane per kind of connection) and the
	// events the monitor saw; Axis marks its time.
	Lanes []lane
	Axis  []mark
	// Promises are what the run judged (or could not), failures first,
	// then errors, waivers and passes; NotJudged what it does not judge
	// (not applicable, not selected), shown apart; both less those
	// another shard's run judges (Elsewhere counts them). Each with the
	// evidence files it rests on.
	Promises, NotJudged []row
	Elsewhere           int
}

// Bars are the phases' lane, the first, for the list below the timeline.
func (v runView) Bars() []bar { return v.Lanes[0].Bars }

// Ticks are the events' lane, the last, for the list below the timeline.
func (v runView) Ticks() []tick { return v.Lanes[len(v.Lanes)-1].Ticks }

// row is a verdict as the page shows it, with links to the files under
// the report's folder that it rests on.
type row struct {
	Result
	Links []link
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

// html writes report.html for a report written in dir: one page with no
// outside resource (styles and the outcome filter inline), the verdict,
// each run's timeline in lanes, and every promise with its reason,
// reference, evidence and measures, and links to the evidence files of
// dir it rests on ("": links to nothing).
func (r *Results) html(w io.Writer, dir string) error {
	var runs []runView
	for _, run := range r.Runs {
		v := runView{Run: run}
		v.Lanes, v.Axis = lanes(run)
		own, elsewhere := r.own(run)
		judged, notJudged := firstThingsFirst(own)
		ev := evidenceIn(dir, run.Strategy)
		v.Promises, v.NotJudged = ev.rows(judged), ev.rows(notJudged)
		v.Elsewhere = elsewhere
		runs = append(runs, v)
	}
	return page.Execute(w, map[string]any{"R": r, "Runs": runs, "Outcomes": outcomes, "Counts": r.countLine()})
}

// axis marks a timeline of length total from its start at a round step
// (30 s to an hour), no more than ten marks besides the start.
func axis(total time.Duration) []mark {
	step := time.Hour
	for _, s := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
		if total/s <= 10 {
			step = s
			break
		}
	}
	var out []mark
	for at := time.Duration(0); at <= total; at += step {
		out = append(out, mark{Left: round(at.Seconds() / total.Seconds() * 100), Label: clock(at)})
	}
	return out
}

// clock says an offset into a run as its axis shows it: 0, 30s, 1m30s, 25m, 1h, 1h15m.
func clock(at time.Duration) string {
	m := int(at / time.Minute)
	switch {
	case at == 0:
		return "0"
	case at%time.Minute != 0:
		return at.String()
	case m < 60:
		return fmt.Sprintf("%dm", m)
	case m%60 == 0:
		return fmt.Sprintf("%dh", m/60)
	}
	return fmt.Sprintf("%dh%dm", m/60, m%60)
}

func round(f float64) float64 { return math.Round(f*100) / 100 }
