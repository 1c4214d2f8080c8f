package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/run"
)

// `skewer down` of a name with no cluster but a state folder - what a
// failed create leaves - removes the folder; with neither, it says there
// is no such cluster and fails.
func TestDownRemovesWhatAFailedCreateLeft(t *testing.T) {
	ctx := needDocker(t)
	state := t.TempDir()
	t.Setenv("SKEWER_STATE", state)
	left := filepath.Join(state, "skewer-left", "audit", "skewer-left-control-plane")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Run(ctx, []string{"down", "--name", "skewer-left"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "removed the state folder") {
		t.Errorf("down of a failed create's leftovers: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(state, "skewer-left")); !os.IsNotExist(err) {
		t.Errorf("the state folder is still there: %v", err)
	}
	stderr.Reset()
	if code := Run(ctx, []string{"down", "--name", "skewer-left"}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "no kind cluster") {
		t.Errorf("down of nothing: exit %d, %q; want a failure naming it", code, stderr.String())
	}
}

// A cluster of the name a planned run makes is refused before anything
// is built, made or written - the in-place run's name too, whose create
// came after the whole surge run.
func TestCertifyRefusesATakenClusterName(t *testing.T) {
	ctx := needDocker(t)
	ref := localImage(t, map[string]string{"etc/hostname": "x"})
	name := fmt.Sprintf("skewer-taken-%d", time.Now().UnixNano()%1e6)
	ctr := name + "-in-place-control-plane"
	if err := run.Command("docker", "create", "--name", ctr, "--label", "io.x-k8s.kind.cluster="+name+"-in-place", ref, "/x").Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Command("docker", "rm", "-f", ctr).Run(context.Background()) })
	out := filepath.Join(t.TempDir(), "results")
	var stdout, stderr bytes.Buffer
	code := Run(ctx, []string{"certify", "--from", "v1.35.4", "--to", "v1.36.3", "--name", name, "--only", "rollout.versions", "--out", out}, &stdout, &stderr)
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); code != exitBadInput || len(lines) != 1 ||
		!strings.Contains(lines[0], "a cluster named "+name+"-in-place exists") {
		t.Errorf("exit %d, stderr %q; want 2 and one line naming the in-place run's cluster", code, stderr.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("--out was made for a refused run: %v", err)
	}
}
