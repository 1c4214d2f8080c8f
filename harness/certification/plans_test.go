package certification

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// plans renders, for every selection a user can make one promise or one
// area at a time (and a few --skip), the parts each strategy's run takes
// and the promises it judges: what the registry of checks decides.
func plans(t *testing.T) string {
	var b strings.Builder
	render := func(title string, in Input) {
		fmt.Fprintf(&b, "== %s\n", title)
		plan := Plan(in)
		for _, s := range []rollout.Strategy{rollout.StrategySurge, rollout.StrategyInPlace} {
			var judged []string
			for _, v := range plan[s] {
				if v.Outcome == promise.Pass {
					judged = append(judged, string(v.ID))
				}
			}
			if len(judged) == 0 {
				fmt.Fprintf(&b, "%s: nothing\n", s)
				continue
			}
			fmt.Fprintf(&b, "%s: %s\n  %s\n", s, strings.Join(in.Parts(s), ", "), strings.Join(judged, " "))
		}
	}
	render("all", input(t))
	for _, p := range promise.Catalogue() {
		in := input(t)
		in.Only = []promise.ID{p.ID}
		render("--only "+string(p.ID), in)
	}
	for _, area := range promise.Areas() {
		in := input(t)
		in.Shard = []string{area}
		render("--shard "+area, in)
	}
	for _, skip := range [][]promise.ID{trafficPromises, {"proxy.discovery.converges"}, {"rollout.membership", "rollout.versions"}} {
		in := input(t)
		in.Skip = skip
		render(fmt.Sprintf("--skip %v", skip), in)
	}
	return b.String()
}

// What each selection runs and judges is kept in testdata/plans.txt: a
// change to the checks' registry or to the runner that changes it shows
// here, line by line (UPDATE=1 writes the file again, for a change meant).
func TestPlans(t *testing.T) {
	want := plans(t)
	path := filepath.Join("testdata", "plans.txt")
	if os.Getenv("UPDATE") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: UPDATE=1 go test ./harness/certification -run TestPlans", err)
	}
	if string(got) != want {
		g, w := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := 0; i < len(g) && i < len(w); i++ {
			if g[i] != w[i] {
				t.Fatalf("the plans differ from testdata/plans.txt at line %d:\n kept: %s\n  now: %s\n(UPDATE=1 go test ./harness/certification -run TestPlans, for a change meant)", i+1, g[i], w[i])
			}
		}
		t.Fatalf("the plans differ from testdata/plans.txt in length (%d lines kept, %d now)", len(g), len(w))
	}
}
