package report

import (
	"fmt"
	"strings"
	"time"
)

// lane is one labelled line of a run's timeline.
type lane struct {
	Label string
	Title string // the label whole, where Label is shortened
	Kind  string // phases, node, traffic or events
	Bars  []bar
	Ticks []tick
}

// lanes lays a run out on one time line from its first phase's start to
// its last one's end: the phases; a lane per node a rollout's step
// changed, with those steps; a lane per kind of connection through the
// load balancer with the traffic's steps, failed ones marked; and the
// events. The phases' lane comes first and the events' last, always.
func lanes(run Run) ([]lane, []mark) {
	phases := lane{Label: "phases", Kind: "phases"}
	events := lane{Label: "events", Kind: "events"}
	if len(run.Phases) == 0 {
		return []lane{phases, events}, nil
	}
	start, end := run.Phases[0].Start, run.Phases[0].End
	for _, p := range run.Phases {
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
	// A bar stays on the line (a step's traffic may outlast the phases),
	// and one too short to see is drawn at 0.5%.
	place := func(p Phase) bar {
		left := min(max(p.Start.Sub(start).Seconds()/total*100, 0), 99.5)
		width := min(max(p.End.Sub(p.Start).Seconds()/total*100, 0.5), 100-left)
		return bar{Phase: p, Left: round(left), Width: round(width), Took: p.End.Sub(p.Start).Round(time.Second).String()}
	}
	byNode := map[string]*lane{}
	var nodes []string
	for _, p := range run.Phases {
		phases.Bars = append(phases.Bars, place(p))
		for _, s := range p.Steps {
			if s.Node == "" {
				continue
			}
			if byNode[s.Node] == nil {
				// A node's name less its cluster's: control-plane5.
				byNode[s.Node] = &lane{Label: strings.TrimPrefix(s.Node, run.Cluster+"-"), Title: s.Node, Kind: "node"}
				nodes = append(nodes, s.Node)
			}
			byNode[s.Node].Bars = append(byNode[s.Node].Bars, place(s))
		}
	}
	out := []lane{phases}
	for _, n := range nodes {
		out = append(out, *byNode[n])
	}
	out = append(out, trafficLanes(run.Steps, place)...)
	for _, e := range run.Events {
		events.Ticks = append(events.Ticks, tick{Event: e, Left: round(min(max(e.Time.Sub(start).Seconds()/total*100, 0), 100))})
	}
	return append(out, events), axis(time.Duration(total * float64(time.Second)))
}

// trafficLanes are a lane per kind of connection through the load
// balancer with a bar per step of the traffic, placed by place from its
// first request to its last; its error says how many failed. Results
// written before a step's times were recorded have no such lanes.
func trafficLanes(figures []StepLatency, place func(Phase) bar) []lane {
	byConn := map[string]*lane{}
	var conns []string
	for _, f := range figures {
		if f.First.IsZero() {
			continue
		}
		if byConn[f.Conn] == nil {
			byConn[f.Conn] = &lane{Label: "traffic, " + f.Conn, Kind: "traffic"}
			conns = append(conns, f.Conn)
		}
		p := Phase{Name: fmt.Sprintf("%s: %d requests, p99 %s", f.Phase, f.Requests, f.P99.Round(time.Millisecond)), Start: f.First, End: f.Last}
		if f.Failed > 0 {
			p.Error = fmt.Sprintf("%d of %d failed", f.Failed, f.Requests)
		}
		byConn[f.Conn].Bars = append(byConn[f.Conn].Bars, place(p))
	}
	var out []lane
	for _, c := range conns {
		out = append(out, *byConn[c])
	}
	return out
}
