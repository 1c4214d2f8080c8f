package nodeimage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// fakeNodeImage imports an image holding files (path -> content) and
// nothing else: enough for what reads a node image without running it.
func fakeNodeImage(t *testing.T, files map[string]string) string {
	t.Helper()
	ref := fmt.Sprintf("skewer.local/test-given:%d", time.Now().UnixNano())
	if err := docker.ImportFiles(context.Background(), ref, files); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Command("docker", "image", "rm", "-f", ref).Run(context.Background()) })
	return ref
}

// A node image the user brings is known by the version it carries, not by
// a name; what is not a node image is refused in one line; the resolver
// hands a given image out as it is.
func TestGivenNodeImage(t *testing.T) {
	ctx := context.Background()
	if err := run.Command("docker", "info").Run(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	vendor := fakeNodeImage(t, map[string]string{"kind/version": "v1.36.3-acme.2\n"})
	v, err := ImageVersion(ctx, vendor)
	if err != nil {
		t.Fatal(err)
	}
	if v.String() != "v1.36.3-acme.2" || v.Minor() != 36 {
		t.Errorf("version %s (minor %d), want v1.36.3-acme.2, minor 36", v, v.Minor())
	}
	for ref, want := range map[string]string{
		fakeNodeImage(t, map[string]string{"etc/hostname": "x"}):        "is not a kind node image: it has no /kind/version",
		fakeNodeImage(t, map[string]string{"kind/version": "latest\n"}): `/kind/version holds "latest"`,
		"skewer.local/test-given:absent":                                "no local image skewer.local/test-given:absent",
	} {
		if _, err := ImageVersion(ctx, ref); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", ref, err, want)
		}
	}
	left, _ := run.Command("docker", "ps", "-a", "--filter", "ancestor="+vendor, "-q").String(ctx)
	if left != "" {
		t.Errorf("containers left from reading %s: %s", vendor, left)
	}

	r := &Resolver{Source: SourceLocal, Given: map[version.Version]string{v: vendor}}
	if err := r.Check(ctx, v); err != nil {
		t.Errorf("Check of the given version: %v", err)
	}
	if ref, err := r.Resolve(ctx, v); err != nil || ref != vendor {
		t.Errorf("Resolve = %s, %v; want %s as it is", ref, err, vendor)
	}
	gone := &Resolver{Given: map[version.Version]string{v: "skewer.local/test-given:absent"}}
	if err := gone.Check(ctx, v); err == nil || !strings.Contains(err.Error(), "is not on this machine") {
		t.Errorf("a given image that is gone: %v", err)
	}
}
