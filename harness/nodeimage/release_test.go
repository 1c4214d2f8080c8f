package nodeimage

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBinary builds testdata/fakekube, a program that answers the version
// questions skewer asks a Kubernetes binary, reporting version.
func fakeBinary(t *testing.T, version string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fake")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.v="+version, "-o", bin, ".")
	build.Dir = filepath.Join("testdata", "fakekube")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// release lays out binaries in dir, each a copy of the fake (overrides:
// name -> another file).
func release(t *testing.T, dir, fake string, overrides map[string]string, leave ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range kubeCommands {
		if strings.Contains(strings.Join(leave, " "), c) {
			continue
		}
		src := fake
		if o, ok := overrides[c]; ok {
			src = o
		}
		body, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c), body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// tarball packs dir's files under prefix into a gzipped tar.
func tarball(t *testing.T, dir, prefix, file string) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: prefix + e.Name(), Mode: 0o755, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

// A vendor's release is known by what its binaries report, in a directory
// or in the server release tarball's layout; its digests are kept; what
// cannot make a node image is refused in one line.
func TestOpenRelease(t *testing.T) {
	ctx := context.Background()
	fake := fakeBinary(t, "v1.36.3-acme.2")
	cache := t.TempDir()

	dir := filepath.Join(t.TempDir(), "kubernetes", "server", "bin")
	release(t, dir, fake, nil)
	rel, err := OpenRelease(ctx, filepath.Dir(filepath.Dir(filepath.Dir(dir))), cache)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version.String() != "v1.36.3-acme.2" || rel.Kind() != "binaries" || rel.SHA256 != "" || len(rel.Binaries) != len(kubeCommands) {
		t.Errorf("directory: %+v", rel)
	}
	sum, _ := fileSHA256(fake)
	if rel.Binaries["kube-apiserver"] != sum {
		t.Errorf("kube-apiserver's sha256 %s, want %s", rel.Binaries["kube-apiserver"], sum)
	}
	if ref := ReleaseRef(rel); !strings.HasPrefix(ref, "skewer.local/node:v1.36.3-acme.2-") {
		t.Errorf("ReleaseRef %s", ref)
	}

	tgz := filepath.Join(t.TempDir(), "kubernetes-server-linux-amd64.tar.gz")
	tarball(t, dir, "kubernetes/server/bin/", tgz)
	fromTar, err := OpenRelease(ctx, tgz, cache)
	if err != nil {
		t.Fatal(err)
	}
	tsum, _ := fileSHA256(tgz)
	if fromTar.Kind() != "release-tarball" || fromTar.SHA256 != tsum || fromTar.Key() != rel.Key() || fromTar.Version != rel.Version {
		t.Errorf("tarball: %+v, want the directory's binaries and the tarball's sha256 %s", fromTar, tsum)
	}
	// A second opening reads the unpacked copy.
	if again, err := OpenRelease(ctx, tgz, cache); err != nil || again.Key() != rel.Key() {
		t.Errorf("opened again: %+v, %v", again, err)
	}

	other := fakeBinary(t, "v1.36.2")
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\necho Kubernetes v1.36.3\n"), 0o755)
	for name, tc := range map[string]struct {
		make func(dir string) string
		want string
	}{
		"nothing there": {func(dir string) string { return filepath.Join(dir, "absent") }, "no such file"},
		"no kube-apiserver": {func(dir string) string {
			release(t, dir, fake, nil, "kube-apiserver")
			return dir
		}, "has no kube-apiserver"},
		"a binary missing": {func(dir string) string {
			release(t, dir, fake, nil, "kube-proxy")
			return dir
		}, "lacks kube-proxy"},
		"binaries that disagree": {func(dir string) string {
			release(t, dir, fake, map[string]string{"kubelet": other})
			return dir
		}, "its binaries disagree on their version: kubeadm reports v1.36.3-acme.2, kubelet v1.36.2"},
		"a script, not an executable": {func(dir string) string {
			release(t, dir, fake, map[string]string{"kube-scheduler": script})
			return dir
		}, "kube-scheduler is not a Linux executable"},
		"a tarball without the server layout": {func(dir string) string {
			src := filepath.Join(dir, "src")
			release(t, src, fake, nil)
			tarball(t, src, "bin-elsewhere/", filepath.Join(dir, "x.tar.gz"))
			return filepath.Join(dir, "x.tar.gz")
		}, "it holds no kube-apiserver"},
		"not a tarball": {func(dir string) string {
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello, this is no archive at all, just some text"), 0o644)
			return filepath.Join(dir, "notes.txt")
		}, "not a readable tar archive"},
	} {
		given := tc.make(t.TempDir())
		_, err := OpenRelease(ctx, given, cache)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", name, err, tc.want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "releases", "*.tmp")); len(left) > 0 {
		t.Errorf("a refused tarball left %v in the cache", left)
	}
}

// A dynamically linked control-plane binary cannot run as an image of the
// binary alone; kubelet, which runs on the node, may be.
func TestDynamicControlPlaneBinaryIsRefused(t *testing.T) {
	dynamic := "/bin/true" // Debian's, linked against libc
	if err := checkBinary(dynamic, false); err != nil {
		t.Fatalf("%s as kubelet: %v", dynamic, err)
	}
	err := checkBinary(dynamic, true)
	if err == nil || !strings.Contains(err.Error(), "is dynamically linked") {
		t.Errorf("%s as kube-apiserver: %v", dynamic, err)
	}
}
