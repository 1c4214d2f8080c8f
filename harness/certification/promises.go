package certification

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// PromisesDoc is docs/promises.md: the catalogue, the runs that judge
// each promise and the waivers that may cover it, rendered from the code
// (a test keeps the file equal to it), so the page cannot drift from what
// certify does.
func PromisesDoc(ws promise.Waivers) string {
	var b strings.Builder
	b.WriteString("# The promises skewer certifies\n\n" +
		"Generated from the code (`harness/certify` catalogue, `harness/certification` runs,\n" +
		"`clusters/waivers/upstream.yaml`); `UPDATE=1 go test ./harness/certification -run TestPromisesDoc`\n" +
		"writes it again. A promise has one verdict per run: pass, fail, waived, error,\n" +
		"not-applicable or not-selected (README, \"Reading a verdict\").\n")
	area := ""
	for _, p := range promise.Catalogue() {
		if a, _, _ := strings.Cut(string(p.ID), "."); a != area {
			area = a
			fmt.Fprintf(&b, "\n## %s\n\n| promise | statement | judged by | waiver |\n|---|---|---|---|\n", area)
		}
		var runs []string
		for _, s := range []rollout.Strategy{rollout.StrategySurge, rollout.StrategyInPlace} {
			if slices.Contains(checkedBy(s), p.ID) {
				runs = append(runs, string(s))
			}
		}
		waiver := ""
		if w, ok := ws[p.ID]; ok {
			waiver = fmt.Sprintf("cause `%s`, %s ([upstream](%s))", w.Cause, strings.Join(w.Versions, ", "), w.Reference)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p.ID, p.Statement, strings.Join(runs, ", "), waiver)
	}
	return b.String()
}
