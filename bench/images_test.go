package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/internal/run"
)

// BenchmarkNodeImage builds each version's node image cold (empty Go build
// cache and skewer cache, every image rebuilt; modules stay downloaded) and
// then warm (nothing changed), and prints the node image's size. Set
// BENCH_COLD=0 to skip the cold builds (they take minutes per version).
func BenchmarkNodeImage(b *testing.B) {
	needDocker(b)
	cold := os.Getenv("BENCH_COLD") != "0"
	// One empty Go build cache and one forced builder for every cold build:
	// the first version starts from nothing, a later one reuses what the
	// first built (Go packages, root filesystems, base image), as in use.
	coldGoCache := b.TempDir()
	coldBuilder := &nodeimage.Builder{CacheDir: b.TempDir(), Force: true, Out: os.Stdout}
	for i, ver := range versions {
		v := ver.String()
		if cold {
			b.Run("cold/"+v, func(b *testing.B) {
				b.Setenv("GOCACHE", coldGoCache)
				before := componentLayers(b)
				start := time.Now()
				if _, err := coldBuilder.Build(context.Background(), ver); err != nil {
					b.Fatal(err)
				}
				took := time.Since(start)
				report(b, took.Seconds(), "s")
				f := figure{what: "node image " + v + " cold, the first version", took: took, limit: firstImageLimit,
					note: "no anchor: kind's own builder needs the network"}
				if i > 0 {
					f.what, f.limit = "node image "+v+" cold, after the first", secondImageLimit
				}
				record(f)
				// Reproducibility: a rebuilt component image has the same
				// layer digests as the one it replaced.
				after := componentLayers(b)
				same, total := 0, 0
				for ref, layers := range before {
					if a, ok := after[ref]; ok && a.id != layers.id { // rebuilt in this run
						total++
						if a.layers == layers.layers {
							same++
						} else {
							b.Logf("%s: layers differ after a rebuild: %s vs %s", ref, layers.layers, a.layers)
						}
					}
				}
				if total > 0 {
					report(b, float64(same), "rebuilt-images-identical")
					report(b, float64(total), "rebuilt-images")
				}
			})
		}
		b.Run("warm/"+v, func(b *testing.B) {
			bl := &nodeimage.Builder{Out: discard{}}
			if _, err := bl.Build(context.Background(), ver); err != nil { // make sure it is cached
				b.Fatal(err)
			}
			start := time.Now()
			if _, err := bl.Build(context.Background(), ver); err != nil {
				b.Fatal(err)
			}
			report(b, time.Since(start).Seconds(), "s")
		})
		b.Run("size/"+v, func(b *testing.B) {
			out, err := run.Command("docker", "image", "inspect", "--format", "{{.Size}}", nodeimage.Ref(ver)).String(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			size, _ := strconv.ParseFloat(strings.TrimSpace(out), 64)
			report(b, size/1e6, "MB")
		})
	}
}

type imageLayers struct{ id, layers string }

// componentLayers maps every locally built component image (the names
// kubeadm asks for) to its ID and layer digests.
func componentLayers(b *testing.B) map[string]imageLayers {
	rows, err := run.Command("docker", "image", "ls", "--filter", "label="+nodeimage.LocalBuildLabel,
		"--format", "{{.Repository}}:{{.Tag}}").String(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]imageLayers{}
	for _, ref := range strings.Fields(rows) {
		if !strings.HasPrefix(ref, nodeimage.HostName("registry.k8s.io/")) {
			continue
		}
		got, err := run.Command("docker", "image", "inspect", "--format", "{{.ID}} {{json .RootFS.Layers}}", ref).String(context.Background())
		if id, layers, ok := strings.Cut(got, " "); err == nil && ok {
			out[ref] = imageLayers{id: id, layers: layers}
		}
	}
	return out
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
