package skewer_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The rooms stay small enough to read in one sitting: no Go file over
// maxFileLines lines and no function over maxFuncLines, tests aside.
const (
	maxFileLines = 400
	maxFuncLines = 60
)

// tooBig are the agreed exceptions, each with its reason. A file or
// function that shrinks under its limit must leave the list (the test
// says so), and one that grows over it must be split or argued here.
var tooBig = map[string]string{
	// Tables: one line per flag or field, nothing to follow.
	"cmd/skewer/certify.go:certifyCommand":     "the certify command's flag table, one line per flag",
	"cmd/skewer/images.go:imagesCommand":       "the images command's subcommands and flags, one line each",
	"harness/cluster/kindconfig.go:kindConfig": "kind's cluster config as one literal, in the shape kind documents",
	"fixtures/cmd/fixture/main.go:main":        "the fixture's flag table: one binary, every role's flags",
	// Debt (issue 37, item 3), each to be split along the seam named.
	"harness/certification/trust.go:CheckTrust":              "one request per identity: a table of identities and what each must get",
	"harness/certification/proxy.go:CheckRouteVerbs":         "one step per verb: a table of verbs",
	"cmd/skewer/certify.go:certifyInput":                     "the flags read into one Input: the reading of each flag apart (item 4)",
	"harness/rollout/inplace.go:inPlace":                     "the steps of one node apart from the plan over the nodes",
	"fixtures/logagent.go:LogAgent.Run":                      "the shipping loop apart from the flush on SIGTERM",
	"harness/traffic/notfound.go:ExplainNotFound":            "one cause per case: a table of causes",
	"harness/sidecarchecks/stops.go:Sidecars.stopConditions": "one condition per case: a table",
	"harness/nodeimage/standins.go:plan.standIns":            "one stand-in per image: a table",
}

func TestRoomsAreSmall(t *testing.T) {
	over, err := oversized(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range over {
		if _, ok := tooBig[o.name]; !ok {
			t.Errorf("%s: %d lines, over %d: split it, or argue it in tooBig", o.name, o.lines, o.limit)
		}
	}
	known := map[string]bool{}
	for _, o := range over {
		known[o.name] = true
	}
	for name := range tooBig {
		if !known[name] {
			t.Errorf("%s is no longer over its limit: take it off tooBig", name)
		}
	}
}

// The check itself finds a long file and a long function, and names them.
func TestTheRoomCheckFindsWhatItShould(t *testing.T) {
	dir := t.TempDir()
	long := "package x\n\nfunc Long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n" +
		strings.Repeat("\n// filler\n", maxFileLines/2)
	if err := writeFile(filepath.Join(dir, "go.mod"), "module x\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "x", "x.go"), long); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "x", "x_test.go"), long); err != nil {
		t.Fatal(err)
	}
	over, err := oversized(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range over {
		got = append(got, o.name)
	}
	if strings.Join(got, " ") != "x/x.go x/x.go:Long" {
		t.Errorf("found %v, want the file and its function (tests aside)", got)
	}
}

type oversize struct {
	name         string
	lines, limit int
}

// oversized lists the non-test Go files over maxFileLines and the
// functions over maxFuncLines under root, by path (and function name).
func oversized(root string) ([]oversize, error) {
	var out []oversize
	fset := token.NewFileSet()
	err := walkGoFiles(root, func(path string) error {
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			out = append(out, oversize{rel, n, maxFileLines})
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				out = append(out, oversize{fmt.Sprintf("%s:%s", rel, name), n, maxFuncLines})
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, err
}

func writeFile(path, body string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(body), 0o644)
}
