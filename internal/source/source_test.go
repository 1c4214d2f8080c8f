package source

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Outside a checkout, Root is the copy the binary carries: written once,
// a module of its own from which the programs skewer puts into images
// build.
func TestRootOutsideACheckoutIsTheCarriedCopy(t *testing.T) {
	if _, ok := Checkout(); !ok {
		t.Fatal("the test runs inside the checkout")
	}
	t.Setenv("SKEWER_SOURCE", "")
	t.Setenv("SKEWER_CACHE", t.TempDir())
	t.Chdir(t.TempDir())
	if dir, ok := Checkout(); ok {
		t.Fatalf("%s found as a checkout from an empty directory", dir)
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(CacheDir(), root); err != nil || filepath.Dir(rel) != "source" {
		t.Errorf("copy at %s, want under %s/source", root, CacheDir())
	}
	for _, f := range []string{"go.mod", "go.sum", "clusters/ha.yaml", "clusters/waivers/upstream.yaml", "standins/lb/main.go", "fixtures/cmd/fixture/main.go", "harness/faults/relay/main.go"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the copy lacks %s", f)
		}
	}
	if again, err := Root(); err != nil || again != root {
		t.Errorf("second Root: %s, %v; want %s", again, err, root)
	}
	// What the image builder compiles from it. The two on client-go take
	// minutes on a cold cache: left to the long run, and to make e2e's
	// image build, which compiles them the same way.
	programs := []string{"./standins/lb", "./harness/faults/relay"}
	if !testing.Short() {
		programs = append(programs, "./standins/cni", "./fixtures/cmd/fixture")
	}
	cmd := exec.Command("go", append([]string{"build", "-trimpath", "-o", t.TempDir() + "/"}, programs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building from the copy: %v\n%s", err, out)
	}
}
