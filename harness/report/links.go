package report

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// EvidenceDir is where, under a report's folder, certify keeps the
// evidence of each run: EvidenceDir/<strategy>/ holds logs/<node>/ (kind's
// export of a node), logs/apiservers/<node>.log (every apiserver container
// the node ran), audit/<node>/ (its audit logs), metrics/ (each phase's
// edges) and traffic.json (every request of the traffic).
const EvidenceDir = "evidence"

// link is a file or folder of the report's folder, relative to it.
type link struct {
	Href, Label string
}

// evidence is what one run's evidence folder holds, as a page written in
// dir links it.
type evidence struct {
	dir   string // the report's folder; "" for a page written elsewhere
	root  string // EvidenceDir/<strategy>, relative to dir
	nodes []string
}

func evidenceIn(dir, strategy string) evidence {
	e := evidence{dir: dir, root: path.Join(EvidenceDir, strategy)}
	if dir == "" {
		return e
	}
	for _, sub := range []string{"audit", "logs"} {
		entries, _ := os.ReadDir(filepath.Join(dir, e.root, sub))
		for _, d := range entries {
			if d.IsDir() && d.Name() != "apiservers" && !slices.Contains(e.nodes, d.Name()) {
				e.nodes = append(e.nodes, d.Name())
			}
		}
	}
	slices.Sort(e.nodes)
	return e
}

func (e evidence) rows(results []Result) []row {
	out := make([]row, len(results))
	for i, r := range results {
		out[i] = row{Result: r, Links: e.links(r)}
	}
	return out
}

// links are the files a verdict rests on: for every node its reason,
// evidence or measures name, that node's audit log, its apiservers' kept
// log and its node logs; the metrics kept at each phase's edges for a
// verdict on metrics; every request of the traffic for a verdict on a
// rollout; and last the run's whole evidence folder. Only what
// exists is linked.
func (e evidence) links(r Result) []link {
	if e.dir == "" || r.Outcome == promise.NotSelected {
		return nil
	}
	text := strings.Join(append(append([]string{r.Reason}, r.Evidence...), r.Measured...), "\n")
	var out []link
	add := func(rel, label string) {
		if _, err := os.Stat(filepath.Join(e.dir, filepath.FromSlash(rel))); err == nil {
			out = append(out, link{Href: rel, Label: label})
		}
	}
	for _, n := range e.nodes {
		if !names(text, n) {
			continue
		}
		add(path.Join(e.root, "audit", n)+"/", n+": audit log")
		add(path.Join(e.root, "logs", "apiservers", n+".log"), n+": apiserver log")
		add(path.Join(e.root, "logs", n)+"/", n+": node logs")
	}
	if strings.Contains(string(r.ID), ".metrics.") || strings.Contains(text, "_total") {
		add(path.Join(e.root, "metrics")+"/", "metrics at each phase's edges")
	}
	if r.ID.Area() == "rollout" {
		add(path.Join(e.root, "traffic.json"), "every request of the traffic")
	}
	add(e.root+"/", "all of this run's evidence")
	return out
}

// names says whether text names node: its name, not only the start of a
// longer one (cp1 is not named by cp10).
func names(text, node string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], node)
		if j < 0 {
			return false
		}
		end := i + j + len(node)
		if end == len(text) || !isNameChar(text[end]) {
			if start := i + j; start == 0 || !isNameChar(text[start-1]) {
				return true
			}
		}
		i = i + j + 1
	}
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
}
