package nodeimage

import (
	"context"
	"fmt"
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
		return cmd.Run(ctx)
	}); err != nil {
		return "", fmt.Errorf("failed to build the fixtures: %w", err)
	}
	err = dockerBuild(ctx, ref, map[string][]byte{
		"Dockerfile": []byte("FROM scratch\nCOPY fixture /fixture\nENTRYPOINT [\"/fixture\"]\n"),
	}, map[string]string{"fixture": filepath.Join(bin, "fixture")}, key)
	if err != nil {
		return "", fmt.Errorf("failed to build %s: %w", ref, err)
	}
	return ref, nil
}
