package nodeimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skewer-k8s/skewer/internal/run"
	"github.com/skewer-k8s/skewer/internal/source"
)

// fixtureRepo is the local image the sidecar suite's Pods run.
const fixtureRepo = "skewer.local/fixture"

// FixtureImage builds the suites' fixture programs (./fixtures/cmd/fixture)
// into an image of one static binary on an empty base, tagged by a digest
// of their sources, and returns its reference. Nothing is rebuilt while
// the sources are unchanged; the image is never pushed nor pulled: load it
// into a cluster's nodes (cluster.LoadImages).
func (b *Builder) FixtureImage(ctx context.Context) (string, error) {
	root, err := source.Root()
	if err != nil {
		return "", fmt.Errorf("the fixture image is built from skewer's source: %w", err)
	}
	src, err := sourceKey(root, "fixtures")
	if err != nil {
		return "", err
	}
	key := cacheKey("fixture", src)
	ref := fmt.Sprintf("%s:%s", fixtureRepo, key[:12])
	if imageCurrent(ctx, ref, key) {
		return ref, nil
	}
	bin := b.cacheDir("bin", "fixture-"+key)
	if _, err := cachedDir(bin, func(out string) error {
		cmd := run.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", filepath.Join(out, "fixture"), "./fixtures/cmd/fixture")
		cmd.Dir = root
		cmd.Env = []string{"CGO_ENABLED=0"}
		if err := cmd.Run(ctx); err != nil {
			return err
		}
		return buildOldClient(ctx, filepath.Join(root, "fixtures", "oldclient"), filepath.Join(out, "oldclient"))
	}); err != nil {
		return "", fmt.Errorf("failed to build the fixtures: %w", err)
	}
	err = dockerBuild(ctx, ref, map[string][]byte{
		"Dockerfile": []byte("FROM scratch\nCOPY fixture /fixture\nCOPY oldclient /oldclient\nENTRYPOINT [\"/fixture\"]\n"),
	}, map[string]string{"fixture": filepath.Join(bin, "fixture"), "oldclient": filepath.Join(bin, "oldclient")}, key)
	if err != nil {
		return "", fmt.Errorf("failed to build %s: %w", ref, err)
	}
	return ref, nil
}

// buildOldClient builds fixtures/oldclient, a module of its own pinned to
// an old k8s.io/api, kept there as module.mod and module.sum (see its
// main.go): from a copy of src with those named go.mod and go.sum.
func buildOldClient(ctx context.Context, src, out string) error {
	dir, err := os.MkdirTemp("", "skewer-oldclient-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for from, to := range map[string]string{"main.go": "main.go", "module.mod": "go.mod", "module.sum": "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			return fmt.Errorf("the old client's source: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			return err
		}
	}
	cmd := run.Command("go", "build", "-tags", "oldclient", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = []string{"CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly"}
	if err := cmd.Run(ctx); err != nil {
		return fmt.Errorf("the old client (fixtures/oldclient): %w", err)
	}
	return nil
}
