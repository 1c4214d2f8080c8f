package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What `go install` gives works anywhere: the binary, copied to an empty
// directory outside the checkout and run there with an empty home and
// cache, finds its profiles, waivers and catalogue in what it carries, and
// leaves the directory as it found it.
func TestInstalledBinaryWorksOutsideTheCheckout(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "skewer")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work, home := t.TempDir(), t.TempDir()
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "HOME=") && !strings.HasPrefix(e, "SKEWER_") && !strings.HasPrefix(e, "XDG_CACHE_HOME=") {
			env = append(env, e)
		}
	}
	// Go's module cache stays where it is: an empty home would only make
	// `go list -m` fetch again what it already has.
	gomodcache, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	env = append(env, "HOME="+home, "GOMODCACHE="+strings.TrimSpace(string(gomodcache)))
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = work, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "skewer "},
		{[]string{"certify", "--list"}, "proxy.route.verbs"},
		{[]string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--dry-run", "--ignore-preflight-errors=all"}, "surge run on cluster skewer-certify-surge"},
	} {
		out, errOut, err := run(tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("skewer %s: %v, stdout %q, stderr %q; want %q", strings.Join(tc.args, " "), err, out, errOut, tc.want)
		}
	}
	if _, errOut, err := run("up", "--profile", "nosuchprofile"); err == nil || !strings.Contains(errOut, "known profiles are ha, ha-mixed, sidecar") {
		t.Errorf("up --profile nosuchprofile: %v, %q; want the known profiles named", err, errOut)
	}
	if exec.Command("docker", "info").Run() == nil {
		out, errOut, err := run("images", "list", "-o", "json")
		var images []map[string]string
		if err != nil || json.Unmarshal([]byte(out), &images) != nil {
			t.Errorf("images list -o json: %v, %q, %q", err, out, errOut)
		}
	} else {
		t.Log("no Docker engine answers: images list not tried")
	}
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("the working directory holds %d entries afterwards", len(left))
	}
	if copies, _ := filepath.Glob(filepath.Join(home, ".cache", "skewer", "source", "*", "go.mod")); len(copies) != 1 {
		t.Errorf("copies of the source in the empty home's cache: %v; want one", copies)
	}
}
