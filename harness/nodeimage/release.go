package nodeimage

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/run"
)

// Release is a Kubernetes build its vendor brings, for a node image built
// around it: a server release tarball (the kubernetes-server-linux-amd64
// layout, whose kubernetes/server/bin holds the binaries), a directory
// holding the same binaries, or a source tree (a git checkout of
// k8s.io/kubernetes with the vendor's patches, built here). Its version is
// what its binaries report, or for a tree what git describe says (as
// hack/lib/version.sh reads it), never what a flag says. The component
// image tars a release tarball also carries are not used: skewer makes the
// images from the binaries, as it does for its own builds.
type Release struct {
	// Path is what was given.
	Path string `json:"path"`
	// SHA256 is the tarball's digest; empty for a directory.
	SHA256 string `json:"sha256,omitempty"`
	// Version is what every binary reports.
	Version version.Version `json:"version"`
	// Binaries are the sha256 of each binary the node image is made of (a
	// source tree's once it is built).
	Binaries map[string]string `json:"binaries"`
	// Commit and Dirty are a source tree's: the commit HEAD names, and
	// whether the tree had changes to it.
	Commit string `json:"commit,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`
	// dir holds the binaries: the directory given, or the tarball's
	// unpacked in the cache; empty for a tree until it is built.
	dir string
	// tree is a source tree's root.
	tree string
	// key is a digest of what the release is: its binaries, or a tree's
	// commit and changes.
	key string
}

// Kind names what was given: release-tarball, binaries or source-tree.
func (r *Release) Kind() string {
	switch {
	case r.tree != "":
		return "source-tree"
	case r.SHA256 != "":
		return "release-tarball"
	}
	return "binaries"
}

// Key is a digest of what the release is: everything built around it is
// cached by it.
func (r *Release) Key() string { return r.key }

// binariesKey is a digest of the binaries' digests.
func (r *Release) binariesKey() string {
	h := sha256.New()
	for _, c := range kubeCommands {
		fmt.Fprintf(h, "%s=%s\n", c, r.Binaries[c])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ReleaseRef is the node image skewer builds around r: its version and
// the digest of its binaries, so two builds that report one version never
// share a name.
func ReleaseRef(r *Release) string { return repo + ":" + tag(r.Version) + "-" + r.Key()[:8] }

// staticOnly are the binaries that become images of the binary alone.
var staticOnly = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// OpenRelease reads a release tarball or a directory of binaries: it finds
// every binary a node image needs, checks that each can run here, and
// reads the version they report. A tarball is unpacked once under
// cacheDir. Anything missing or wrong is refused in one line.
func OpenRelease(ctx context.Context, given, cacheDir string) (*Release, error) {
	st, err := os.Stat(given)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", given, err)
	}
	r := &Release{Path: given, Binaries: map[string]string{}}
	if st.IsDir() && isSourceTree(given) {
		return openTree(ctx, r)
	}
	if st.IsDir() {
		r.dir, err = binDir(given)
	} else {
		r.dir, err = r.unpack(given, cacheDir)
	}
	if err != nil {
		return nil, err
	}
	if r.Version, err = r.readBinaries(ctx, r.dir); err != nil {
		return nil, fmt.Errorf("release %s: %w", given, err)
	}
	r.key = r.binariesKey()
	return r, nil
}

// readBinaries takes dir as the release's binaries: each must run here
// (checkBinary), its digest is kept, and the version they all report is
// returned.
func (r *Release) readBinaries(ctx context.Context, dir string) (version.Version, error) {
	r.dir = dir
	for _, c := range kubeCommands {
		file := filepath.Join(dir, c)
		if err := checkBinary(file, slices.Contains(staticOnly, c)); err != nil {
			return version.Version{}, err
		}
		sum, err := fileSHA256(file)
		if err != nil {
			return version.Version{}, err
		}
		r.Binaries[c] = sum
	}
	return releaseVersion(ctx, dir)
}

// binDir is where a directory keeps the binaries: itself, or the server
// release layout inside it.
func binDir(dir string) (string, error) {
	for _, d := range []string{dir, filepath.Join(dir, "kubernetes", "server", "bin"), filepath.Join(dir, "server", "bin")} {
		if _, err := os.Stat(filepath.Join(d, "kube-apiserver")); err == nil {
			return d, missing(d)
		}
	}
	return "", fmt.Errorf("release %s has no kube-apiserver (looked in it, kubernetes/server/bin and server/bin) and is no source tree of k8s.io/kubernetes", dir)
}

func missing(dir string) error {
	var gone []string
	for _, c := range kubeCommands {
		if _, err := os.Stat(filepath.Join(dir, c)); err != nil {
			gone = append(gone, c)
		}
	}
	if len(gone) > 0 {
		return fmt.Errorf("release %s lacks %s (a node image needs %s)", dir, strings.Join(gone, ", "), strings.Join(kubeCommands, ", "))
	}
	return nil
}

// unpack takes the binaries out of a release tarball (gzip or plain) into
// the cache, once per tarball digest.
func (r *Release) unpack(tarball, cacheDir string) (string, error) {
	var err error
	if r.SHA256, err = fileSHA256(tarball); err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, "releases", r.SHA256[:16])
	_, err = cachedDir(dir, func(out string) error { return extractBinaries(tarball, out) })
	if err != nil {
		return "", fmt.Errorf("release %s: %w", tarball, err)
	}
	return dir, nil
}

func extractBinaries(tarball, out string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer gz.Close()
		in = gz
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	found := map[string]bool{}
	tr := tar.NewReader(in)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("not a readable tar archive: %w", err)
		}
		name := path.Clean(h.Name)
		base := path.Base(name)
		if h.Typeflag != tar.TypeReg || !slices.Contains(kubeCommands, base) || path.Base(path.Dir(name)) != "bin" {
			continue
		}
		w, err := os.OpenFile(filepath.Join(out, base), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, tr)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		found[base] = true
	}
	if !found["kube-apiserver"] {
		return errors.New("it holds no kube-apiserver (want the server release layout: kubernetes/server/bin/kube-apiserver)")
	}
	return missing(out)
}

// checkBinary refuses what cannot run in a node image here: not an ELF
// executable of this machine's architecture, or, for the components that
// run as images of the binary alone, one that needs a dynamic loader.
func checkBinary(file string, static bool) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", filepath.Base(file), err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, this machine is %s", filepath.Base(file), f.Machine, runtime.GOARCH)
	}
	if static {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("%s is dynamically linked; it runs as an image of the binary alone, so build it with CGO_ENABLED=0 as upstream does", filepath.Base(file))
			}
		}
	}
	return nil
}

// releaseVersion is the version every binary reports; binaries that do
// not agree are refused.
func releaseVersion(ctx context.Context, dir string) (version.Version, error) {
	var first version.Version
	for _, c := range kubeCommands {
		v, err := binaryVersion(ctx, filepath.Join(dir, c))
		if err != nil {
			return version.Version{}, err
		}
		switch {
		case first.IsZero():
			first = v
		case v != first:
			return version.Version{}, fmt.Errorf("its binaries disagree on their version: %s reports %s, %s %s", kubeCommands[0], first, c, v)
		}
	}
	return first, nil
}

// binaryVersion asks one Kubernetes binary its version.
func binaryVersion(ctx context.Context, file string) (version.Version, error) {
	name := filepath.Base(file)
	var out string
	var err error
	switch name {
	case "kubeadm":
		out, err = run.Command(file, "version", "-o", "short").String(ctx)
	case "kubectl":
		var raw []byte
		if raw, err = run.Command(file, "version", "--client", "-o", "json").Output(ctx); err == nil {
			var v struct {
				ClientVersion struct{ GitVersion string } `json:"clientVersion"`
			}
			err = json.Unmarshal(raw, &v)
			out = v.ClientVersion.GitVersion
		}
	default:
		// "Kubernetes v1.36.3"
		out, err = run.Command(file, "--version").String(ctx)
		out = strings.TrimPrefix(strings.TrimSpace(out), "Kubernetes ")
	}
	if err != nil {
		return version.Version{}, fmt.Errorf("%s did not say its version: %w", name, err)
	}
	v, err := version.Parse(strings.TrimSpace(out))
	if err != nil {
		return version.Version{}, fmt.Errorf("%s reports no Kubernetes version: %w", name, err)
	}
	return v, nil
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
