package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// Bad input gets one line naming the problem and exit status 2, before
// anything is built or created.
func TestBadInputIsRefusedInOneLine(t *testing.T) {
	dir := t.TempDir()
	malformed := filepath.Join(dir, "bad.yaml")
	os.WriteFile(malformed, []byte("name: x\ncontrolPlanes: [\n"), 0o644)
	earlier := filepath.Join(dir, "earlier")
	os.MkdirAll(filepath.Join(earlier, "evidence"), 0o755)
	os.WriteFile(filepath.Join(earlier, "results.json"), []byte("{}"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--profile", "ha", "--version", "v1.36"}, "invalid Kubernetes version"},
		{[]string{"up", "--profile", "ha", "--control-plane-versions", "v1.35.4,v1.37.2"}, "more than one minor apart"},
		{[]string{"up", "--profile", "ha", "--worker-versions", "v1.36.3"}, "newer than apiserver"},
		{[]string{"up", "--profile", "nosuchprofile"}, `no profile "nosuchprofile"`},
		{[]string{"up", "--profile", malformed}, "malformed profile"},
		{[]string{"up", "--profile", "ha", "--image-source", "registry"}, "invalid image source"},
		{[]string{"up", "--profile", "ha", "--name", "Not_A_Name"}, "invalid cluster name"},
		{[]string{"images", "build"}, "--version or --kubernetes is required"},
		{[]string{"images", "build", "--version", "v1.36.3,latest"}, "invalid Kubernetes version"},
		{[]string{"rollout"}, "--to is required"},
		{[]string{"rollout", "--to", "v1.36"}, "invalid Kubernetes version"},
		{[]string{"rollout", "--to", "v1.36.3", "--strategy", "blue-green"}, "unknown strategy"},
		{[]string{"rollout", "--to", "v1.36.3", "--image-source", "registry"}, "invalid image source"},
		{[]string{"rollback", "--to", "1.36"}, "invalid Kubernetes version"},
		{[]string{"down", "extra-arg"}, "unknown command"},
		{[]string{"version", "-o", "yaml"}, "invalid --output"},
		{[]string{"get", "clusters", "-o", "yaml"}, "invalid --output"},
		{[]string{"images", "list", "-o", "yaml"}, "invalid --output"},
		{[]string{"export", "logs"}, "accepts between 1 and 2 arg(s)"},
		{[]string{"export", "logs", "a", "b", "c"}, "accepts between 1 and 2 arg(s)"},
		{[]string{"certify", "--to", "v1.36.3"}, "needs --from and --to"},
		{[]string{"certify", "--from", "v1.36.3", "--to", "v1.35.4"}, "goes backwards"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.37.2"}, "not an adjacent pair"},
		{[]string{"certify", "--from", "v1.35.4.1", "--to", "v1.36.3"}, "invalid Kubernetes version"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--strategy", "blue-green"}, "unknown strategy"},
		// Not served by the Go module proxy: refused before v1.36.3's image is built.
		{[]string{"certify", "--from", "v1.36.3", "--to", "v1.37.999"}, "does not serve k8s.io/kubernetes@v1.37.999"},
		{[]string{"images", "build", "--version", "v1.36.3,v1.36.99"}, "does not serve k8s.io/kubernetes@v1.36.99"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--only", "proxy.route.verbz"}, "not a promise of the catalogue"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--shard", "network"}, `shard "network" is not an area of the catalogue`},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--shard", "proxy", "--only", "proxy.route.verbs"}, "--shard and --only both choose"},
		{[]string{"report", "merge", "a", "b"}, "--out: where to write the merged results is required"},
		{[]string{"report", "merge", "/nonexistent/shard", "--out", dir}, "no such file or directory"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--waivers", "/nonexistent/waivers.yaml"}, "failed to read waivers"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--profile", malformed}, "malformed profile"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--profile", "sidecar"}, "a rolling replacement needs 3"},
		// Results that could not be kept: refused before a cluster is made.
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--out", "/etc/passwd/results", "--name", "skewer-test-out"}, "/etc/passwd: not a directory"},
		// An earlier run's results and evidence would mix with this run's.
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--out", earlier, "--name", "skewer-test-out"}, "holds an earlier run's results.json, evidence: give an empty folder, or --force"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--max-failed", "150"}, "the share of failed requests allowed is 1.5"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--max-failed", "NaN"}, "the share of failed requests allowed is NaN"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--max-failed", "-Inf"}, "the share of failed requests allowed is -Inf"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--max-unavailable", "-1s"}, "a bound on unavailability is negative"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--deadline", "-50m"}, "--deadline -50m0s: want a positive duration, as 50m, or 0 for none"},
		// A value that does not parse: what a good one looks like.
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--max-unavailable", "15"}, `--max-unavailable "15": want a number with its unit, as 15s, 2m or 1m30s`},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--max-failed", "one"}, `--max-failed "one": want a number, as 1 or 0.5`},
		{[]string{"rollout", "--to", "v1.36.3", "--pause-after", "first"}, `--pause-after "first": want a whole number, as 2`},
		{[]string{"-v", "debug", "version"}, `--verbosity "debug": want a whole number, as 2`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := tc.args
			if args[0] == "certify" {
				// Should a case's input turn out valid, it plans and
				// exits; it must not start a certification (one did, on
				// a cluster left behind, when --shard proxy became an area).
				args = append(slices.Clone(args), "--dry-run", "--ignore-preflight-errors=all")
			}
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), args, &stdout, &stderr)
			if code != exitBadInput {
				t.Fatalf("exit %d, want %d (bad input); stderr %q", code, exitBadInput, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("stderr %q: want one line containing %q", stderr.String(), tc.want)
			}
		})
	}
}

// --dry-run checks the input and says what each run judges, creating
// nothing; --list prints the catalogue.
func TestCertifyPlans(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--strategy", "in-place", "--skip", "rollout.versions", "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"certify v1.35.4 -> v1.36.3",
		"in-place run on cluster skewer-certify-in-place: create, load the newer images, traffic, roll every control plane in place, the sidecar Jobs; judges 14 promise(s)",
		"not-selected, left out by --skip:\n  rollout.versions",
		"not-applicable, the in-place strategy holds no mixed window, fault or sidecar phase for it: the surge run judges it:\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	_, surgeOnly, _ := strings.Cut(out, "the surge run judges it:\n")
	surgeOnly, _, _ = strings.Cut(surgeOnly, "not-selected,")
	for _, id := range []string{"proxy.discovery.converges", "proxy.route.verbs", "proxy.trust.identity", "proxy.audit.complete", "proxy.rollback.all-old", "rollout.rollback"} {
		if !strings.Contains(surgeOnly, "  "+id+"\n") {
			t.Errorf("%s is not among what only the surge run judges:\n%s", id, surgeOnly)
		}
	}
	if strings.Contains(out, "surge run on") {
		t.Errorf("--strategy in-place plans a surge run:\n%s", out)
	}
	// A selection takes only the parts of the run it needs.
	stdout.Reset()
	if code := Run(context.Background(), []string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--only", "proxy.fault.peer-killed", "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"surge run on cluster skewer-certify-surge: create, the mixed window, faults, rollback, the mixed window with two; judges 1 promise(s)",
		"in-place run: judges nothing, makes no cluster"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout.String())
		}
	}
	// The proxy's promises under their old area name, as a user's CI
	// may still give them: read, and said so.
	stdout.Reset()
	if code := Run(context.Background(), []string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--only", "mvp.fault.peer-killed", "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr); code != 0 {
		t.Fatalf("the old ID: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "judges 1 promise(s)") || !strings.Contains(stdout.String()+stderr.String(), "note: mvp.fault.peer-killed is proxy.fault.peer-killed now") {
		t.Errorf("the old ID:\n%s%s", stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := Run(context.Background(), []string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--shard", "mvp", "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr); code != 0 {
		t.Fatalf("the old shard: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String()+stderr.String(), "note: area mvp is proxy now") {
		t.Errorf("the old shard:\n%s%s", stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := Run(context.Background(), []string{"certify", "--list"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--list: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "proxy.route.verbs") || strings.Count(stdout.String(), "\n") < 40 {
		t.Errorf("--list:\n%s", stdout.String())
	}
}

// --apiserver-feature-gates names a side and gates; anything else is refused.
func TestSideGates(t *testing.T) {
	pair, err := promise.ParsePair("v1.35.4", "v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	got, err := sideGates([]string{"to:UnknownVersionInteroperabilityProxy=false,A=true"}, pair)
	if err != nil || len(got) != 1 || got[pair.To]["UnknownVersionInteroperabilityProxy"] || !got[pair.To]["A"] {
		t.Errorf("%v, %v", got, err)
	}
	for _, bad := range []string{"UnknownVersionInteroperabilityProxy=false", "next:A=true", "to:A", "to:A=maybe", "to:=true"} {
		if _, err := sideGates([]string{bad}, pair); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// --force replaces an earlier run's results and evidence in --out and
// nothing else; without it the folder is left as it was.
func TestOutDirForce(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"results.json", "junit.xml", "summary.md", "report.html", "evidence/surge/audit.log", "notes.txt"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("earlier"), 0o644)
	}
	if err := outDir(dir, false, false); err == nil {
		t.Fatal("an --out with an earlier run's results was accepted without --force")
	}
	// A dry run with --force would replace them, and replaces nothing.
	if err := outDir(dir, true, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "evidence", "surge", "audit.log")); err != nil {
		t.Fatalf("a refused --out was changed: %v", err)
	}
	if err := outDir(dir, true, false); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || left[0].Name() != "notes.txt" {
		t.Errorf("--force left %v, want only notes.txt", left)
	}
	if err := outDir(dir, false, false); err != nil {
		t.Errorf("a folder with no earlier run's files was refused: %v", err)
	}
	// A dry run makes no folder, and refuses one that could not be made.
	absent := filepath.Join(dir, "a", "b")
	if err := outDir(absent, false, true); err != nil {
		t.Errorf("a dry run refused a folder it could make: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Error("a dry run made the --out folder")
	}
	if err := outDir(filepath.Join(dir, "notes.txt", "out"), false, true); err == nil || !strings.Contains(err.Error(), "notes.txt: not a directory") {
		t.Errorf("a dry run under a file: %v", err)
	}
}

// A minor alone is one of its releases, as kind and kubectl take it: the
// newest with a node image here, else the newest the Go module proxy
// serves; what it became is said. A minor with neither is refused.
func TestCertifyTakesAMinor(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"certify", "--from", "1.35", "--to", "v1.36", "--strategy", "surge", "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "certify v1.35.") || !strings.Contains(stderr.String(), "--from 1.35 is v1.35.") {
		t.Errorf("--from 1.35 --to v1.36: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	code = Run(context.Background(), []string{"certify", "--from", "1.35", "--to", "1.99", "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr)
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); code != exitBadInput || !strings.Contains(lines[len(lines)-1], "--to 1.99: no node image of v1.99 here") {
		t.Errorf("--to 1.99: exit %d, stderr %q", code, stderr.String())
	}
}

// The preflight reads the machine before anything is built or made, under
// --dry-run too: a Docker engine that does not answer refuses the run
// (exit 2) with what to do, unless the check is ignored; an unknown check
// name is refused in one line.
func TestCertifyPreflight(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-engine.sock")
	out := t.TempDir() + "/results"
	args := []string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--strategy", "surge", "--out", out}
	var stdout, stderr bytes.Buffer
	for _, dry := range []bool{true, false} {
		a := args
		if dry {
			a = append(slices.Clone(args), "--dry-run")
		}
		stdout.Reset()
		stderr.Reset()
		if code := Run(context.Background(), a, &stdout, &stderr); code != 2 ||
			!strings.Contains(stderr.String(), "[preflight] docker: no Docker engine answers") ||
			!strings.Contains(stderr.String(), "--ignore-preflight-errors=docker goes on regardless") {
			t.Errorf("dry run %v, no engine: exit %d, want 2 and the docker check's refusal:\n%s%s", dry, code, stdout.String(), stderr.String())
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("dry run %v: a refused run made --out: %v", dry, err)
		}
	}
	stdout.Reset()
	if code := Run(context.Background(), append(slices.Clone(args), "--dry-run", "--ignore-preflight-errors", "docker"), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "[preflight] docker: ignored: no Docker engine answers") ||
		!strings.Contains(stdout.String(), "[preflight] clusters, containers, root: not checked") {
		t.Errorf("the docker check ignored: exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	if code := Run(context.Background(), append(slices.Clone(args), "--dry-run", "--ignore-preflight-errors", "dsik"), &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--ignore-preflight-errors dsik: not a preflight check (want some of docker, clusters, containers, root, disk, memory, or all)") {
		t.Errorf("an unknown check: exit %d: %s", code, stderr.String())
	}
}
