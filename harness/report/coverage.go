package report

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// Coverage is how much of the catalogue a certification judged: a
// promise is judged when some run gave it pass, fail or waived. A pass
// on a fifth of the catalogue must not read as a pass on all of it.
type Coverage struct {
	Judged   int `json:"judged"`
	Promises int `json:"promises"`
	// Unjudged are the areas with promises no run judged.
	Unjudged []AreaCoverage `json:"unjudged,omitempty"`
}

// AreaCoverage is how many of an area's promises no run judged.
type AreaCoverage struct {
	Area     string `json:"area"`
	Unjudged int    `json:"unjudged"`
	Promises int    `json:"promises"`
}

func (c Coverage) String() string {
	s := fmt.Sprintf("judged %d of %d promises", c.Judged, c.Promises)
	var parts []string
	for _, a := range c.Unjudged {
		parts = append(parts, fmt.Sprintf("%s %d of %d", a.Area, a.Unjudged, a.Promises))
	}
	if len(parts) > 0 {
		s += "; not judged: " + strings.Join(parts, ", ")
	}
	return s
}

func (r *Results) coverage() Coverage {
	judged := map[promise.ID]bool{}
	for _, run := range r.Runs {
		for _, p := range run.Promises {
			if p.Outcome.Judged() {
				judged[p.ID] = true
			}
		}
	}
	c := Coverage{}
	byArea := map[string]*AreaCoverage{}
	var areas []string
	for _, p := range promise.Catalogue() {
		c.Promises++
		a := p.ID.Area()
		if byArea[a] == nil {
			byArea[a] = &AreaCoverage{Area: a}
			areas = append(areas, a)
		}
		byArea[a].Promises++
		if judged[p.ID] {
			c.Judged++
		} else {
			byArea[a].Unjudged++
		}
	}
	for _, a := range areas {
		if byArea[a].Unjudged > 0 {
			c.Unjudged = append(c.Unjudged, *byArea[a])
		}
	}
	return c
}

// Headline is the verdict in one line, with its coverage: what the last
// line of a run, the summary and the report lead with.
func (r *Results) Headline() string {
	s := fmt.Sprintf("skewer certify %s -> %s: %s, %s", r.From, r.To, strings.ToUpper(string(r.Outcome)), r.Coverage)
	if r.Strict {
		s += " (--strict: no waiver)"
	}
	return s
}
