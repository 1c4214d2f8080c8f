package nodeimage

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// A component image is built on the host under skewer's name only; the tar
// a node imports names it as kubeadm asks for it. Built twice: the second
// time it is cached by the host's name.
func TestComponentImagesKeepUpstreamNamesOffTheHost(t *testing.T) {
	ctx := context.Background()
	if err := docker.Ping(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	ref := fmt.Sprintf("registry.k8s.io/skewer-test-component:v%d", time.Now().UnixNano())
	for _, name := range []string{ref, HostName(ref)} {
		t.Cleanup(func() { _ = run.Command("docker", "image", "rm", "-f", name).Run(context.Background()) })
	}
	built := 0
	c := componentBuild{ref: ref, key: "k1", make: func(ctx context.Context, host, key string) error {
		built++
		return docker.ImportFiles(ctx, host, map[string]string{"bin": "not really a component"}, labels(key)...)
	}}
	p := &plan{b: &Builder{CacheDir: t.TempDir(), Out: io.Discard}}
	for range 2 {
		if _, err := p.saveImages(ctx, []componentBuild{c}); err != nil {
			t.Fatal(err)
		}
	}
	if built != 1 {
		t.Errorf("built %d times, want once (then cached)", built)
	}
	if docker.ImageExists(ctx, ref) {
		t.Errorf("the host holds %s: a user's image of that name would be shadowed", ref)
	}
	if !docker.ImageExists(ctx, HostName(ref)) {
		t.Errorf("the host lacks %s", HostName(ref))
	}
	if _, err := run.Command("docker", "load", "-i", p.tarOf[ref]).String(ctx); err != nil {
		t.Fatal(err)
	}
	if !docker.ImageExists(ctx, ref) {
		t.Errorf("the tar does not load as %s", ref)
	}
}
