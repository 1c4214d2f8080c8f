package nodeimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	// SourcePull pulls the pinned kindest/node digest. Opt-in only: a
	// certification run is hermetic by default.
	SourcePull Source = "pull"
)

// ParseSource validates a --image-source value.
func ParseSource(s string) (Source, error) {
	switch Source(s) {
	case SourceBuild, SourceLocal, SourcePull:
		return Source(s), nil
	}
	return "", fmt.Errorf("invalid image source %q: want build, local or pull", s)
}

// pinned are kindest/node images by digest, for --image-source=pull only.
// kind v0.33.0 publishes this one as its default node image.
var pinned = map[string]string{
	"v1.37.0": "kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5",
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
// already here, so a machine offline with its images works); for a pull,
// one without a pinned digest; for local, one without a local image.
func (r *Resolver) Check(ctx context.Context, v version.Version) error {
	if ref, ok := r.Given[v]; ok {
		if !docker.ImageExists(ctx, ref) {
			return fmt.Errorf("the node image given for %s, %s, is not on this machine", v, ref)
		}
		return nil
	}
	switch r.Source {
	case SourcePull:
		if _, ok := pinned[v.String()]; !ok {
			return fmt.Errorf("no pinned kindest/node digest for %s; use --image-source=build", v)
		}
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
	switch r.Source {
	case SourcePull:
		if err := r.Check(ctx, v); err != nil {
			return "", err
		}
		ref := pinned[v.String()]
		if !docker.ImageExists(ctx, ref) {
			fmt.Fprintf(out, "node image %s: pulling %s (--image-source=pull)\n", v, ref)
			if err := run.Command("docker", "pull", ref).Run(ctx); err != nil {
				return "", err
			}
		} else {
			fmt.Fprintf(out, "node image %s: %s (pulled earlier)\n", v, ref)
		}
		return ref, nil
	case SourceLocal:
		if err := r.Check(ctx, v); err != nil {
			return "", err
		}
		fmt.Fprintf(out, "node image %s: %s (local)\n", v, Ref(v))
		return Ref(v), nil
	default:
		b := r.Builder
		if b == nil {
			b = &Builder{Out: out}
		}
		fmt.Fprintf(out, "node image %s: local build, built offline where the cache lacks it\n", v)
		return b.Build(ctx, v)
	}
}
