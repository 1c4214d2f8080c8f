package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docCommands are the shell commands of the ```sh blocks of a document,
// comments cut off.
func docCommands(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && line == "```sh"
		case in:
			if i := strings.Index(line, "#"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	return out
}

// Every command the README and the usage page show still works as shown:
// a skewer command line parses (its command and every flag, run with
// --help; one with --dry-run is run as it is, the preflight reporting), a
// make target and its variables exist in the Makefile, and what go test
// or go install names is in the module. None goes stale unseen.
func TestDocumentedCommands(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllSubmatch(mk, -1) {
		targets[string(m[1])] = true
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+) \?=`).FindAllSubmatch(mk, -1) {
		vars[string(m[1])] = true
	}
	seen := 0
	for _, doc := range []string{"../../README.md", "../../docs/usage.md"} {
		for _, line := range docCommands(t, doc) {
			seen++
			args := strings.Fields(line)
			where := filepath.Base(doc) + ": " + line
			switch {
			case args[0] == "skewer" || args[0] == "bin/skewer":
				args = args[1:]
				if slices.Contains(args, "--dry-run") && args[0] == "certify" {
					args = append(args, "--ignore-preflight-errors=all")
				} else {
					args = append(args, "--help")
				}
				var stdout, stderr bytes.Buffer
				if code := Run(context.Background(), args, &stdout, &stderr); code != 0 {
					t.Errorf("%s: exit %d: %s", where, code, stderr.String())
				}
			case args[0] == "make":
				for _, a := range args[1:] {
					if name, _, ok := strings.Cut(a, "="); ok {
						if !vars[name] {
							t.Errorf("%s: the Makefile has no variable %s", where, name)
						}
					} else if !targets[a] {
						t.Errorf("%s: the Makefile has no target %s", where, a)
					}
				}
			case args[0] == "go" && len(args) > 2 && (args[1] == "test" || args[1] == "install"):
				for _, a := range args[2:] {
					if a == "-args" {
						break
					}
					if strings.HasPrefix(a, "-") {
						continue
					}
					pkg, _, _ := strings.Cut(strings.TrimSuffix(a, "/..."), "@")
					pkg = strings.TrimPrefix(pkg, "github.com/skewer-k8s/skewer/")
					if _, err := os.Stat(filepath.Join("../..", pkg)); err != nil {
						t.Errorf("%s: %s is no package of this module", where, a)
					}
				}
			case args[0] == "rm" || args[0] == "go" && args[1] == "clean":
				// Cleaning up by hand: nothing of skewer's to check.
			default:
				t.Errorf("%s: a command this test does not know how to check", where)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found %d commands in the README and usage page: the blocks were not read", seen)
	}
}
