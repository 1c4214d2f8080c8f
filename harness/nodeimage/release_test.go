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
	if left, _ := filepath.Glob(filepath.Join(cache, "releases", "*.tmp*")); len(left) > 0 {
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

// miniTree writes a k8s.io/kubernetes tree in miniature: the module, a
// staging module whose version variables the build sets (as in the real
// tree), and a main per binary answering version questions as fakekube
// does. It builds in seconds, offline.
func miniTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	main, err := os.ReadFile(filepath.Join("testdata", "fakekube", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": "module k8s.io/kubernetes\n\ngo 1.22\n\nrequire k8s.io/component-base v0.0.0\n\nreplace k8s.io/component-base => ./staging/src/k8s.io/component-base\n",
		"staging/src/k8s.io/component-base/go.mod":          "module k8s.io/component-base\n\ngo 1.22\n",
		"staging/src/k8s.io/component-base/version/base.go": "package version\n\nvar gitVersion = \"v0.0.0-master+$Format:%H$\"\n\n// Get is the version the build set.\nfunc Get() string { return gitVersion }\n",
	}
	for _, c := range kubeCommands {
		// fakekube's answers, with the version the build set.
		src := strings.Replace(string(main), "var v = \"unset\"", "var v = version.Get()", 1)
		src = strings.Replace(src, "import (", "import (\n\t\"k8s.io/component-base/version\"", 1)
		files["cmd/"+c+"/main.go"] = src
	}
	for name, body := range files {
		path := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=acme", "-c", "user.email=build@acme.example", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// A vendor's source tree is known by its commit and git describe, built
// with that version, commit and state in its binaries; what is not a
// tagged checkout, and what does not build, is refused in one line.
func TestSourceTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	cache := t.TempDir()
	tree := miniTree(t)
	if _, err := OpenRelease(ctx, tree, cache); err == nil || !strings.Contains(err.Error(), "no git checkout") {
		t.Errorf("a tree outside git: %v", err)
	}
	git(t, tree, "init", "-q")
	git(t, tree, "add", ".")
	git(t, tree, "commit", "-qm", "acme's patches")
	if _, err := OpenRelease(ctx, tree, cache); err == nil || !strings.Contains(err.Error(), "no tag v* before") {
		t.Errorf("an untagged tree: %v", err)
	}
	git(t, tree, "tag", "v1.36.3-acme.2")
	rel, err := OpenRelease(ctx, tree, cache)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version.String() != "v1.36.3-acme.2" || rel.Kind() != "source-tree" || rel.Dirty || len(rel.Commit) != 40 || len(rel.Binaries) != 0 {
		t.Fatalf("tagged tree: %+v", rel)
	}
	out := filepath.Join(t.TempDir(), "bin")
	if err := rel.build(ctx, out, cache); err != nil {
		t.Fatal(err)
	}
	if err := rel.built(ctx, out); err != nil {
		t.Fatal(err)
	}
	if len(rel.Binaries) != len(kubeCommands) {
		t.Errorf("binaries %v", rel.Binaries)
	}

	// A commit after the tag, then a change on top: the version says both.
	os.WriteFile(filepath.Join(tree, "PATCHES"), []byte("one more\n"), 0o644)
	git(t, tree, "add", ".")
	git(t, tree, "commit", "-qm", "one more patch")
	after, err := OpenRelease(ctx, tree, cache)
	if err != nil {
		t.Fatal(err)
	}
	if v := after.Version.String(); !strings.HasPrefix(v, "v1.36.3-acme.2.1+") || len(v) != len("v1.36.3-acme.2.1+")+14 || after.Key() == rel.Key() {
		t.Errorf("one commit after the tag: %s (key %s, was %s)", v, after.Key(), rel.Key())
	}
	os.WriteFile(filepath.Join(tree, "cmd", "kubelet", "broken.go"), []byte("package main\n\nfunc broken() { undefined() }\n"), 0o644)
	dirty, err := OpenRelease(ctx, tree, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !dirty.Dirty || !strings.HasSuffix(dirty.Version.String(), "-dirty") || dirty.Key() == after.Key() {
		t.Errorf("a tree with changes: %+v", dirty)
	}
	err = dirty.build(ctx, filepath.Join(t.TempDir(), "bin"), cache)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "does not build: ") || !strings.Contains(err.Error(), "undefined: undefined") {
		t.Fatalf("a tree that does not build: %v", err)
	}
	log := err.Error()[strings.LastIndex(err.Error(), "the build's output: ")+len("the build's output: ") : len(err.Error())-1]
	if body, rerr := os.ReadFile(log); rerr != nil || !strings.Contains(string(body), "broken.go") {
		t.Errorf("the build's output in %s: %v %q", log, rerr, body)
	}
}

// git describe's answer becomes the version Kubernetes' own build gives it.
func TestTreeVersion(t *testing.T) {
	for _, tc := range []struct {
		described string
		dirty     bool
		want      string
	}{
		{"v1.36.3", false, "v1.36.3"},
		{"v1.36.3-acme.2", true, "v1.36.3-acme.2-dirty"},
		{"v1.36.3-4-g0123456789abcd", false, "v1.36.3-4+0123456789abcd"},
		{"v1.36.3-acme.2-4-g0123456789abcd", true, "v1.36.3-acme.2.4+0123456789abcd-dirty"},
	} {
		v, err := treeVersion(tc.described, tc.dirty)
		if err != nil || v.String() != tc.want {
			t.Errorf("%s (dirty %t): %s, %v; want %s", tc.described, tc.dirty, v, err, tc.want)
		}
	}
	if _, err := treeVersion("release-1.36", false); err == nil {
		t.Error("a describe that is no version was taken")
	}
}
