package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/run"
)

// RemoveImages takes the images with the label, every name of them, and
// leaves an image without it alone. Real images, made on the spot.
func TestRemoveImagesTakesOnlyLabelled(t *testing.T) {
	ctx := context.Background()
	if err := run.Command("docker", "info").Run(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	label := fmt.Sprintf("io.skewer.test-clean-%d", time.Now().UnixNano())
	repo := "skewer.local/test-clean"
	mk := func(tag string, changes ...string) string {
		ref := repo + ":" + tag
		if err := ImportFiles(ctx, ref, map[string]string{"tag": tag}, changes...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = run.Command("docker", "image", "rm", "-f", ref).Run(context.Background()) })
		return ref
	}
	a := mk(label[len(label)-8:]+"-a", "LABEL "+label+"=local")
	b := mk(label[len(label)-8:]+"-b", "LABEL "+label+"=local")
	other := mk(label[len(label)-8:] + "-other")
	alias := repo + ":" + label[len(label)-8:] + "-alias"
	if err := Tag(ctx, a, alias); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Command("docker", "image", "rm", "-f", alias).Run(context.Background()) })

	would, err := RemoveImages(ctx, label, true)
	if err != nil || len(would) != 3 {
		t.Fatalf("dry run: %v, %v; want a, its alias and b", would, err)
	}
	for _, ref := range []string{a, b, alias} {
		if !ImageExists(ctx, ref) {
			t.Errorf("dry run removed %s", ref)
		}
	}
	gone, err := RemoveImages(ctx, label, false)
	if err != nil || len(gone) != 3 {
		t.Fatalf("removed %v, %v; want a, its alias and b", gone, err)
	}
	for _, ref := range []string{a, b, alias} {
		if ImageExists(ctx, ref) {
			t.Errorf("%s is still here", ref)
		}
	}
	if !ImageExists(ctx, other) {
		t.Errorf("%s has no label and was removed", other)
	}
}

// A removal whose kill the engine saw no exit of is asked again; any
// other failure is not. The message is the engine's own, from a make e2e
// whose node removal failed on a loaded host.
func TestKillPending(t *testing.T) {
	pending := errors.New(`command "docker rm -f -v skewer-broken-surge-control-plane3" failed: exit status 1: Error response from daemon: Could not kill running container 6c47b5cbbd02, cannot remove - tried to kill container, but did not receive an exit event`)
	if !killPending(pending) {
		t.Errorf("not asked again: %v", pending)
	}
	if other := errors.New(`command "docker rm -f -v x" failed: exit status 1: Error response from daemon: No such container: x`); killPending(other) {
		t.Errorf("asked again: %v", other)
	}
}

// Every freezer runc left FROZEN or FREEZING under a container is thawed,
// a THAWED one is left as it is. The tree is the shape of a kind node's
// (docker/<id>/kubelet.slice/.../cri-containerd-<id>.scope), on disk.
func TestThawFrozen(t *testing.T) {
	root := t.TempDir()
	scope := filepath.Join(root, "docker", "6c47", "kubelet.slice", "kubelet-kubepods.slice", "cri-containerd-95f3.scope")
	other := filepath.Join(root, "docker", "6c47", "kubelet.slice", "system.slice")
	for dir, state := range map[string]string{scope: "FROZEN\n", other: "THAWED\n", filepath.Join(root, "docker", "6c47"): "FREEZING\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(state), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	thawFrozen(filepath.Join(root, "docker", "6c47"))
	for _, dir := range []string{scope, other, filepath.Join(root, "docker", "6c47")} {
		if got, _ := os.ReadFile(filepath.Join(dir, "freezer.state")); strings.TrimSpace(string(got)) != "THAWED" {
			t.Errorf("%s: %q, want THAWED", dir, got)
		}
	}
	thawFrozen(filepath.Join(root, "no-such-container")) // nothing there: nothing done
}
