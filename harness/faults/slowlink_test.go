package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// The relay is built in a folder of the call's own, removed after it is
// copied: two runs side by side never swap binaries in a shared /tmp path.
func TestCopyRelayLeavesNothingInTheTempDir(t *testing.T) {
	ctx := context.Background()
	if err := docker.Ping(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	name := fmt.Sprintf("skewer-test-relay-%d", time.Now().UnixNano())
	img := "skewer.local/" + name + ":1"
	t.Cleanup(func() {
		_ = docker.Remove(context.Background(), name)
		_ = run.Command("docker", "image", "rm", "-f", img).Run(context.Background())
	})
	if err := docker.ImportFiles(ctx, img, map[string]string{"usr/local/bin/.keep": ""}); err != nil {
		t.Fatal(err)
	}
	if err := run.Command("docker", "create", "--name", name, img, "/none").Run(ctx); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if err := copyRelay(ctx, name); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the temp dir keeps %v", left)
	}
	out := filepath.Join(t.TempDir(), "relay")
	if err := run.Command("docker", "cp", name+":"+relayPath, out).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode()&0o111 == 0 || fi.Size() < 1<<20 {
		t.Errorf("the container's relay: %v %v", fi, err)
	}
}
