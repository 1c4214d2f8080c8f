// Package skewer_test keeps the house in order: every package of the
// module has a floor, and an import may only run down to a lower floor.
// The floors are written here so that a new package has to be given one.
package skewer_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/skewer-k8s/skewer/"

// floors of the house, from the ground up. A package imports only from
// floors below its own; packages on one floor stand side by side.
var floors = [][]string{
	{"."}, // the module's root: the source the binary carries (embed.go)
	{"internal/run", "internal/source", "harness/version", "harness/wait", "harness/discovery", "harness/audit"},
	{"internal/docker", "harness/metrics", "harness/sidecar", "harness/promise"},
	{"harness/nodeimage", "harness/report", "harness/restarts"},
	{"harness/cluster"},
	{"harness/rollout", "harness/faults", "harness/traffic"},
	{"harness/sidecarchecks", "harness/guard"}, // sidecarchecks replaces a worker under its Pods, guard watches a rollout
	{"harness/suite", "harness/certification"},
	{"cmd/skewer", "suites/proxy", "suites/rollout", "suites/sidecar", "suites/smoke", "suites/distribution", "bench"},
}

// apart are programs built into images: they stand on their own and may
// import only from inside their own directory.
var apart = []string{"standins", "fixtures", "harness/faults/relay"}

func TestNoImportRunsBackUp(t *testing.T) {
	imports, err := projectImports(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range violations(imports) {
		t.Error(v)
	}
}

// The check itself fails when an import runs back up, when a package has
// no floor, and when a program built into an image reaches out.
func TestTheCheckCatchesWhatItShould(t *testing.T) {
	got := violations(map[string][]string{
		"internal/docker":  {"harness/cluster"},
		"harness/new":      nil,
		"harness/rollout":  {"harness/faults"},
		"standins/lb":      {"internal/run"},
		"fixtures/cmd/fix": {"fixtures"},
	})
	want := []string{
		"harness/new has no floor",
		"harness/rollout imports harness/faults, on its own floor",
		"internal/docker imports harness/cluster, a floor above it",
		"standins/lb is built into an image but imports internal/run",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func violations(imports map[string][]string) []string {
	floor := map[string]int{}
	for i, f := range floors {
		for _, p := range f {
			floor[p] = i
		}
	}
	var out []string
	for pkg, deps := range imports {
		if root := apartRoot(pkg); root != "" {
			for _, d := range deps {
				if d != root && !strings.HasPrefix(d, root+"/") {
					out = append(out, fmt.Sprintf("%s is built into an image but imports %s", pkg, d))
				}
			}
			continue
		}
		f, ok := floor[pkg]
		if !ok {
			out = append(out, pkg+" has no floor")
			continue
		}
		for _, d := range deps {
			switch df, known := floor[d]; {
			case !known:
				// reported as a package of its own
			case df == f:
				out = append(out, fmt.Sprintf("%s imports %s, on its own floor", pkg, d))
			case df > f:
				out = append(out, fmt.Sprintf("%s imports %s, a floor above it", pkg, d))
			}
		}
	}
	sort.Strings(out)
	return out
}

func apartRoot(pkg string) string {
	for _, a := range apart {
		if pkg == a || strings.HasPrefix(pkg, a+"/") {
			return a
		}
	}
	return ""
}

// projectImports reads, for every directory with Go files, the module's
// packages its files import, tests included.
func projectImports(root string) (map[string][]string, error) {
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := walkGoFiles(root, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == strings.TrimSuffix(module, "/") && pkg != "." {
				out[pkg] = append(out[pkg], ".")
			} else if dep, ok := strings.CutPrefix(p, module); ok && dep != pkg {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	if _, serr := os.Stat(filepath.Join(root, "go.mod")); serr != nil {
		return nil, fmt.Errorf("run from the module's root: %w", serr)
	}
	return out, err
}

// walkGoFiles calls fn with the path of every Go file under root, tests
// included, leaving out hidden, underscored and testdata folders (what
// the go tool leaves out).
// One door into a node: a command runs in a container only through
// internal/docker's exec (docker exec with its context, process group and
// grace on cancel), which cluster.Node wraps. Tests aside.
func TestOneDoorIntoANode(t *testing.T) {
	doors, err := dockerExecs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doors {
		t.Errorf("%s runs docker exec itself: go through cluster.Node or internal/docker", d)
	}
}

// The door check finds a docker exec of its own.
func TestTheDoorCheckFindsASecondDoor(t *testing.T) {
	dir := t.TempDir()
	body := "package x\n\nvar argv = []string{\"docker\", \"exec\", \"-i\", \"node\"}\n"
	for _, f := range []string{"x/x.go", "x/x_test.go", "internal/docker/docker.go"} {
		path := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doors, err := dockerExecs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(doors, " ") != "x/x.go:3" {
		t.Errorf("found %v, want x/x.go:3 alone", doors)
	}
}

// dockerExec is the argv head of a docker exec, however it is spaced.
var dockerExec = regexp.MustCompile(`"docker",\s*"exec"`)

// dockerExecs lists file:line of each docker exec under root outside
// internal/docker and tests.
func dockerExecs(root string) ([]string, error) {
	var out []string
	err := walkGoFiles(root, func(path string) error {
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasSuffix(path, "_test.go") || strings.HasPrefix(rel, "internal/docker/") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range dockerExec.FindAllIndex(src, -1) {
			out = append(out, fmt.Sprintf("%s:%d", rel, 1+strings.Count(string(src[:m[0]]), "\n")))
		}
		return nil
	})
	return out, err
}

func walkGoFiles(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}
