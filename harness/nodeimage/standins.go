package nodeimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
	"github.com/skewer-k8s/skewer/internal/source"
)

// standIn is a program of this repository that stands in for an image kind
// would otherwise pull.
type standIn struct {
	dir     string // package directory, relative to the module root
	binary  string // name of the executable in the image
	ref     string // image reference kind or the node expects
	extra   string // Dockerfile lines after COPY
	withTag bool   // tag ref with the source key (kind does not name this image)
	// beside is an upstream program the image carries too, built from the
	// module proxy.
	beside *upstreamProgram
}

// upstreamProgram is a main package of a module version the Go module
// proxy serves, and the name of its executable in an image.
type upstreamProgram struct {
	module, version, pkg, name string
}

// netpol is the NetworkPolicy engine the CNI stand-in runs beside its
// kindnetd, as kind's own kindnetd embeds it since v0.24: upstream's
// kube-network-policies, which sends a policed Pod's new connections to a
// userspace verdict with nftables' queue expression. A kernel without
// nft_queue (this project's CI machines') refuses its rules, and no
// policy is enforced there: sidecar.network-policy says so
// (docs/decisions.md).
var netpol = upstreamProgram{module: "sigs.k8s.io/kube-network-policies", version: "v0.8.0",
	pkg: "sigs.k8s.io/kube-network-policies/cmd", name: "netpol"}

// sourceKey digests the Go files of a package tree and the module's go.sum.
func sourceKey(root, dir string) (string, error) {
	h := sha256.New()
	var files []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, f := range append(files, filepath.Join(root, "go.sum")) {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (p *plan) standIns(ctx context.Context) (bool, error) {
	root, err := source.Root()
	if err != nil {
		return false, fmt.Errorf("the stand-in images are built from skewer's source: %w", err)
	}
	lb := standIn{dir: "standins/lb", binary: "envoy", ref: loadBalancerImage,
		extra: "RUN mkdir -p /home/envoy\n"}
	cni := standIn{dir: "standins/cni", binary: "kindnetd", ref: cniImageRepo, withTag: true,
		extra: iptablesWrapperDockerfile, beside: &netpol}
	cached := true
	var builds []componentBuild
	for _, s := range []standIn{lb, cni} {
		src, err := sourceKey(root, s.dir)
		if err != nil {
			return false, err
		}
		key := cacheKey("standin", s.dir, src, p.slimKey)
		if s.beside != nil {
			key = cacheKey(key, s.beside.module, s.beside.version)
		}
		ref := s.ref
		if s.withTag {
			ref = fmt.Sprintf("%s:skewer-%s", s.ref, key[:12])
			p.cniRef = ref
		}
		build := func(ctx context.Context, ref, key string) error {
			bin := p.b.cacheDir("bin", "standin-"+key)
			if _, err := p.cachedDir(bin, func(out string) error {
				cmd := run.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", filepath.Join(out, s.binary), "./"+s.dir)
				cmd.Dir = root
				cmd.Env = []string{"CGO_ENABLED=0"}
				return cmd.Run(ctx)
			}); err != nil {
				return err
			}
			dockerfile := fmt.Sprintf("FROM %s\nCOPY %s /usr/local/bin/%[2]s\n%s", p.slimRef(), s.binary, s.extra)
			files := map[string]string{s.binary: filepath.Join(bin, s.binary)}
			if b := s.beside; b != nil {
				dir, err := p.upstreamBinary(ctx, *b)
				if err != nil {
					return err
				}
				dockerfile += fmt.Sprintf("COPY %s /usr/local/bin/%[1]s\n", b.name)
				files[b.name] = filepath.Join(dir, path.Base(b.pkg))
			}
			return dockerBuild(ctx, ref, map[string][]byte{
				"Dockerfile":       []byte(dockerfile),
				"iptables-wrapper": []byte(iptablesWrapper),
			}, files, key)
		}
		if s.ref == loadBalancerImage {
			// kind starts the load balancer from the host's images; it is
			// never preloaded into a node. A real Envoy the host already
			// has (one skewer did not make) is used as kind would use it,
			// and never overwritten.
			if mine, exists := docker.ImageLabel(ctx, ref, LocalBuildLabel); exists && mine == "" {
				p.b.logf("  using this machine's own %s for the load balancer (not skewer's stand-in)", ref)
				continue
			}
			if p.imageCurrent(ctx, ref, key) {
				continue
			}
			cached = false
			p.b.logf("  building skewer's load-balancer stand-in as %s (no Envoy image here; kind clusters on this machine use it too, `skewer images clean` removes it)", ref)
			if err := build(ctx, ref, key); err != nil {
				return false, err
			}
			continue
		}
		builds = append(builds, componentBuild{ref: ref, key: key, make: build})
	}
	saved, err := p.saveImages(ctx, builds)
	return cached && saved, err
}

// upstreamBinary builds u from its module into the cache, once per
// version, and returns the directory its executable is in (named by the
// package's last element, as go build names it).
func (p *plan) upstreamBinary(ctx context.Context, u upstreamProgram) (string, error) {
	dir := p.b.cacheDir("bin", u.name+"-"+u.version)
	_, err := p.cachedDir(dir, func(out string) error {
		return p.goBuild(ctx, goBuild{Name: u.name + "@" + u.version, Require: map[string]string{u.module: u.version},
			Packages: []string{u.pkg}, Out: out})
	})
	if err != nil {
		return "", fmt.Errorf("failed to build %s@%s for the CNI stand-in's image: %w", u.module, u.version, err)
	}
	return dir, nil
}
