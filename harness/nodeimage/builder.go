package nodeimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/source"
)

// Builder makes node images offline, from the Go module proxy and Debian
// packages only. Every artifact is cached by a key derived from its inputs.
type Builder struct {
	// CacheDir holds build outputs and wrapper modules (default: source.CacheDir(): $SKEWER_CACHE, else the user cache directory's skewer/).
	CacheDir string
	// Out receives one progress line per step (default: os.Stderr).
	Out io.Writer
	// Force rebuilds every artifact once in this Builder's life, ignoring
	// what was cached before it (for cold benchmarks): a second version built
	// by the same Builder reuses what the first built, as in real use.
	Force bool

	mu     sync.Mutex // serialises progress lines, guards forced and CacheDir's default
	forced map[string]bool
}

// fresh says whether a forced builder must still rebuild artifact id; it
// answers yes once per id.
func (b *Builder) fresh(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.forced == nil {
		b.forced = map[string]bool{}
	}
	if b.forced[id] {
		return false
	}
	b.forced[id] = true
	return true
}

func (b *Builder) cacheDir(parts ...string) string {
	b.mu.Lock() // a run builds its fixtures while a rollout resolves images
	if b.CacheDir == "" {
		b.CacheDir = source.CacheDir()
	}
	dir := b.CacheDir
	b.mu.Unlock()
	return filepath.Join(append([]string{dir}, parts...)...)
}

func (b *Builder) out() io.Writer {
	if b.Out == nil {
		return os.Stderr
	}
	return b.Out
}

func (b *Builder) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(b.out(), format+"\n", args...)
}

// step runs fn as a named step, printing a heartbeat while it runs long
// and its outcome with the elapsed time; a step found in the cache is
// held back for the plan's last line (done), so a build with nothing to
// do says so in one line.
func (p *plan) step(ctx context.Context, name string, fn func(ctx context.Context) (cached bool, err error)) error {
	b := p.b
	start := time.Now()
	stop := wait.Heartbeat(20*time.Second, func(d time.Duration) { p.show(); b.logf("  ... %s (%s)", name, d.Round(time.Second)) })
	cached, err := fn(ctx)
	stop()
	elapsed := time.Since(start).Round(100 * time.Millisecond)
	switch {
	case err != nil:
		p.show()
		b.logf("  ✗ %s (%s): %v", name, elapsed, err)
		return fmt.Errorf("failed to build %s: %w", name, err)
	case cached:
		b.mu.Lock()
		p.held = append(p.held, name)
		b.mu.Unlock()
	default:
		p.show()
		b.logf("  ✓ %s (built in %s)", name, elapsed)
	}
	return nil
}

// show prints the plan's header once, before its first line of work.
func (p *plan) show() {
	p.shown.Do(func() {
		if p.header != "" {
			p.b.logf("%s", p.header)
		}
		p.working = true
	})
}

// done prints the plan's last line: what the cache held, and how long the
// whole took.
func (p *plan) done(start time.Time) {
	// Once more, doing nothing: what a heartbeat's show wrote is seen here.
	p.shown.Do(func() {})
	took := time.Since(start).Round(100 * time.Millisecond)
	if !p.working {
		p.b.logf("node image %s ready in %s: every piece cached (%s)", p.ref(), took, p.b.cacheDir())
		return
	}
	if len(p.held) > 0 {
		p.b.logf("  ✓ cached: %s", strings.Join(p.held, "; "))
	}
	p.b.logf("node image %s ready in %s", p.ref(), took)
}

// cacheKey is a short digest of everything that determines an artifact.
func cacheKey(parts ...string) string {
	h := sha256.New()
	h.Write([]byte(recipeRevision + "\x00" + runtime.Version() + "\x00" + runtime.GOARCH))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// imageCurrent says whether ref exists, was built from key, and may be reused.
func (p *plan) imageCurrent(ctx context.Context, ref, key string) bool {
	if p.b.Force && p.b.fresh(ref+"@"+key) {
		return false
	}
	return imageCurrent(ctx, ref, key)
}

// cachedDir is the package's cachedDir, rebuilt once if the builder is forced.
func (p *plan) cachedDir(dir string, build func(dir string) error) (bool, error) {
	if p.b.Force && p.b.fresh(dir) {
		_ = os.Remove(filepath.Join(dir, ".complete"))
	}
	return cachedDir(dir, build)
}

// imageCurrent says whether ref exists and was built from key.
func imageCurrent(ctx context.Context, ref, key string) bool {
	v, ok := docker.ImageLabel(ctx, ref, keyLabel)
	return ok && v == key
}

// labels are the docker --change lines every image skewer builds carries.
func labels(key string) []string {
	return []string{
		fmt.Sprintf("LABEL %s=local %s=%s", LocalBuildLabel, keyLabel, key),
	}
}

// Build makes the node image for Kubernetes version v, building only what
// the cache lacks, and returns its reference.
func (b *Builder) Build(ctx context.Context, v version.Version) (string, error) {
	p, err := b.build(ctx, v, nil)
	if err != nil {
		return "", err
	}
	return p.ref(), nil
}

// Artifacts are the pieces a node image of one version is made of, for an
// in-place upgrade of a node that runs another.
type Artifacts struct {
	NodeImage string
	// BinDir holds kubeadm, kubelet, kubectl and the kube-* binaries.
	BinDir string
	// ImageTars are docker-archive tars of every image the node preloads.
	ImageTars []string
	// Tars are the same tars by the image each holds.
	Tars map[string]string
}

// Artifacts builds what the cache lacks for version v and returns its pieces.
func (b *Builder) Artifacts(ctx context.Context, v version.Version) (*Artifacts, error) {
	return b.artifacts(ctx, v, nil)
}

// BuildRelease makes the node image around a vendor's release (its
// binaries; etcd, CoreDNS, pause and the rest built as for any version)
// and returns its pieces; the image is ReleaseRef(r).
func (b *Builder) BuildRelease(ctx context.Context, r *Release) (*Artifacts, error) {
	return b.artifacts(ctx, r.Version, r)
}

func (b *Builder) artifacts(ctx context.Context, v version.Version, r *Release) (*Artifacts, error) {
	p, err := b.build(ctx, v, r)
	if err != nil {
		return nil, err
	}
	return &Artifacts{NodeImage: p.ref(), BinDir: p.kubeDir, ImageTars: p.imageTars, Tars: p.tarOf}, nil
}

func (b *Builder) build(ctx context.Context, v version.Version, r *Release) (*plan, error) {
	if err := docker.Ping(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	p := &plan{b: b, v: v, rel: r}
	p.header = fmt.Sprintf("building node image %s offline (cache %s)", p.ref(), b.cacheDir())
	// debootstrap waits on the network and the disk while the Go builds
	// keep both cores busy: run it beside them.
	rootfsCtx, cancelRootfs := context.WithCancel(ctx)
	defer cancelRootfs()
	rootfsDone := make(chan error, 1)
	go func() { rootfsDone <- p.step(rootfsCtx, "Debian "+debianSuite+" root filesystems", p.rootfs) }()
	binaries := "Kubernetes " + v.String() + " binaries"
	if r != nil {
		binaries += " from " + r.Path
	}
	if err := p.step(ctx, binaries, p.kubeBinaries); err != nil {
		return nil, err
	}
	if err := <-rootfsDone; err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		fn   func(context.Context) (bool, error)
	}{
		{"kind base image (containerd, runc, crictl, CNI plugins)", p.baseImage},
		{"component images for " + v.String(), p.componentImages},
		{"stand-in images (load balancer, CNI)", p.standIns},
		{"node image " + p.ref(), p.nodeImage},
	}
	for _, s := range steps {
		if err := p.step(ctx, s.name, s.fn); err != nil {
			return nil, err
		}
	}
	p.done(start)
	return p, nil
}

// plan carries what earlier steps produced to later ones.
type plan struct {
	b   *Builder
	v   version.Version
	rel *Release // a vendor's binaries, or nil for a build from the module proxy

	kubeDir    string            // kubeadm, kubelet, kubectl, kube-* binaries
	kubeKey    string            // cache key of kubeDir
	baseKey    string            // cache key of the kind base image
	slimKey    string            // cache key of the slim Debian image
	nodeRootfs string            // the node root filesystem image
	imageTars  []string          // docker-archive tars to preload into the node
	tarOf      map[string]string // imageTars by the image each holds
	imagesKey  string            // combined cache key of imageTars
	cniRef     string            // the CNI stand-in image reference

	header  string    // printed before the first step that works (show)
	shown   sync.Once // guards header
	working bool      // a step did more than find its cache
	held    []string  // steps found in the cache (guarded by b.mu)
}

func (p *plan) gitVersion() string { return p.v.String() }

// ref is the node image the plan ends in.
func (p *plan) ref() string {
	if p.rel != nil {
		return ReleaseRef(p.rel)
	}
	return Ref(p.v)
}

// moduleVersion is the k8s.io/kubernetes module the plan takes sources
// from (pause.c): the version itself, or a release's without its vendor
// suffixes (v1.36.3-acme.2 -> v1.36.3).
func (p *plan) moduleVersion() string {
	return fmt.Sprintf("v%d.%d.%d", p.v.Major(), p.v.Minor(), p.v.Patch())
}
