package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/internal/run"
)

// `skewer down` of a name with no cluster but a state folder - what a
// failed create leaves - removes the folder; with neither, it says there
// is no such cluster and fails.
func TestDownRemovesWhatAFailedCreateLeft(t *testing.T) {
	ctx := context.Background()
	if err := run.Command("docker", "info").Run(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
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
