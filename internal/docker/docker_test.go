package docker

import (
	"context"
	"fmt"
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
