package nodeimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// Source says where a node image may come from.
type Source string

const (
	// SourceBuild uses a current local image, else builds one offline (the default).
	SourceBuild Source = "build"
	// SourceLocal uses only an image already on this machine.
	SourceLocal Source = "local"
)

// ParseSource validates a --image-source value. Nothing is ever pulled:
// an image from a registry is pulled by its user and given as it is
// (Resolver.Given).
func ParseSource(s string) (Source, error) {
	switch Source(s) {
	case SourceBuild, SourceLocal:
		return Source(s), nil
	}
	return "", fmt.Errorf("invalid image source %q: want build or local (to use a registry's node image, pull it and give it with --node-image)", s)
}

// Resolver finds node images and prints one line per version saying which
// path it took.
type Resolver struct {
	Source  Source
	Builder *Builder
	Out     io.Writer
	// Given are node images the user brought (a vendor's build, one made
	// by kind build node-image), by the version read from each: used as
	// they are, never rebuilt or retagged, whatever Source says.
	Given map[version.Version]string
	// Releases are vendors' Kubernetes builds, by the version their
	// binaries report: the node image is built around them.
	Releases map[version.Version]*Release
}

func (r *Resolver) builder() *Builder {
	if r.Builder == nil {
		r.Builder = &Builder{Out: r.Out}
	}
	return r.Builder
}

// Artifacts are v's binaries and image tars, for an in-place upgrade: built
// (or taken from a given release) where the cache lacks them. A node image
// given as it is has no such pieces: an in-place upgrade to it is refused.
func (r *Resolver) Artifacts(ctx context.Context, v version.Version) (*Artifacts, error) {
	if err := r.CheckInPlace(v); err != nil {
		return nil, err
	}
	if rel, ok := r.Releases[v]; ok {
		return r.builder().BuildRelease(ctx, rel)
	}
	return r.builder().Artifacts(ctx, v)
}

// CheckInPlace refuses an in-place upgrade to a node image given as it
// is: kubeadm upgrades the binaries and images where each node stands, and
// skewer takes those from a build or a release, not out of an image.
func (r *Resolver) CheckInPlace(v version.Version) error {
	if ref, ok := r.Given[v]; ok {
		return fmt.Errorf("an in-place upgrade to %s needs its binaries and images, not the node image %s: give the build itself (--kubernetes: a server release tarball, a directory of its binaries or a source tree), or upgrade by surge", v, ref)
	}
	return nil
}

// ImageVersion reads the Kubernetes version a node image carries (kind's
// /kind/version), so a given image's version never rests on a flag. An
// image that is not a kind node image is refused in one line.
func ImageVersion(ctx context.Context, ref string) (version.Version, error) {
	if !docker.ImageExists(ctx, ref) {
		return version.Version{}, fmt.Errorf("no local image %s (a given node image is used from this machine's Docker, never pulled)", ref)
	}
	// Read from a container that is created, never started: nothing of
	// the image runs.
	id, err := run.Command("docker", "create", "--entrypoint", "/skewer-never-runs", ref).String(ctx)
	if err != nil {
		return version.Version{}, err
	}
	defer docker.Remove(context.WithoutCancel(ctx), id)
	archive, err := run.Command("docker", "cp", id+":/kind/version", "-").Output(ctx)
	if err != nil {
		return version.Version{}, fmt.Errorf("%s is not a kind node image: it has no /kind/version", ref)
	}
	tr := tar.NewReader(bytes.NewReader(archive))
	if _, err := tr.Next(); err != nil {
		return version.Version{}, fmt.Errorf("%s: reading /kind/version: %w", ref, err)
	}
	raw, err := io.ReadAll(io.LimitReader(tr, 256))
	if err != nil {
		return version.Version{}, err
	}
	out := strings.TrimSpace(string(raw))
	v, err := version.Parse(out)
	if err != nil {
		return version.Version{}, fmt.Errorf("%s is not a kind node image: /kind/version holds %q", ref, out)
	}
	return v, nil
}

// InputKey is the digest of the inputs a local build of ref was made
// from (its io.skewer.key label), or "" for an image skewer did not build.
func InputKey(ctx context.Context, ref string) string {
	key, _ := docker.ImageLabel(ctx, ref, keyLabel)
	return key
}

// Check refuses, in one line and before anything is built or pulled, a
// version no node image can come from: for a build, one the Go module
// proxy does not serve as k8s.io/kubernetes (not asked when the image is
// already here, so a machine offline with its images works); for local,
// one without a local image.
func (r *Resolver) Check(ctx context.Context, v version.Version) error {
	if ref, ok := r.Given[v]; ok {
		if !docker.ImageExists(ctx, ref) {
			return fmt.Errorf("the node image given for %s, %s, is not on this machine", v, ref)
		}
		return nil
	}
	if _, ok := r.Releases[v]; ok {
		return nil
	}
	switch r.Source {
	case SourceLocal:
		if !docker.ImageExists(ctx, Ref(v)) {
			return fmt.Errorf("no local node image %s (build it: skewer images build --version %s)", Ref(v), v)
		}
	default:
		if docker.ImageExists(ctx, Ref(v)) {
			return nil
		}
		// Metadata only: a fraction of a second, nothing downloaded.
		if _, err := run.Command("go", "list", "-m", "-json", "k8s.io/kubernetes@"+v.String()).Output(ctx); err != nil {
			why := err.Error()
			var rerr *run.Error
			if errors.As(err, &rerr) {
				why = strings.Join(strings.Fields(string(rerr.Output)), " ")
			}
			return fmt.Errorf("Kubernetes %s cannot be built: the Go module proxy does not serve k8s.io/kubernetes@%s (%s)", v, v, why)
		}
	}
	return nil
}

// Builds lists the versions whose node image would be built here: not
// given as an image, not taken from the local images only, and not here
// yet (a vendor's release: not yet built around).
func (r *Resolver) Builds(ctx context.Context, vs ...version.Version) []version.Version {
	var out []version.Version
	for _, v := range vs {
		ref := Ref(v)
		if rel, ok := r.Releases[v]; ok {
			ref = ReleaseRef(rel)
		} else if _, ok := r.Given[v]; ok || r.Source == SourceLocal {
			continue
		}
		if !docker.ImageExists(ctx, ref) {
			out = append(out, v)
		}
	}
	return out
}

// NeedsRoot says whether building the versions in builds would run
// debootstrap, which needs root, as a user who is not root: the Debian
// root filesystems are not in the cache.
func NeedsRoot(ctx context.Context, builds []version.Version) bool {
	return len(builds) > 0 && os.Geteuid() != 0 && !rootfsCached(ctx)
}

// Resolve returns the node image for version.
func (r *Resolver) Resolve(ctx context.Context, v version.Version) (string, error) {
	out := r.Out
	if out == nil {
		out = io.Discard
	}
	if ref, ok := r.Given[v]; ok {
		if err := r.Check(ctx, v); err != nil {
			return "", err
		}
		fmt.Fprintf(out, "node image %s: %s (given)\n", v, ref)
		return ref, nil
	}
	if rel, ok := r.Releases[v]; ok {
		fmt.Fprintf(out, "node image %s: built around %s (given)\n", v, rel.Path)
		art, err := r.builder().BuildRelease(ctx, rel)
		if err != nil {
			return "", err
		}
		return art.NodeImage, nil
	}
	if r.Source == SourceLocal {
		if err := r.Check(ctx, v); err != nil {
			return "", err
		}
		fmt.Fprintf(out, "node image %s: %s (local)\n", v, Ref(v))
		return Ref(v), nil
	}
	fmt.Fprintf(out, "node image %s: local build, built offline where the cache lacks it\n", v)
	return r.builder().Build(ctx, v)
}
