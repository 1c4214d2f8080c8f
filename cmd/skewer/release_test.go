package main

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `make release` gives, per architecture, a tar.gz of a static skewer that
// reports the release's version, with LICENSE and README.md, owned by 0,
// and checksums.txt that sha256sum -c accepts; built twice, the archives
// are the same bytes. A version that is no tag is refused, dist untouched.
// amd64 only under -short (arm64 adds a cross build of every package).
func TestMakeRelease(t *testing.T) {
	arches := "amd64"
	if !testing.Short() {
		arches = "amd64 arm64"
	}
	const version = "v0.0.0-test.1"
	dist := t.TempDir()
	release := func(v string) (string, error) {
		cmd := exec.Command("make", "-s", "-C", "../..", "release", "VERSION="+v, "DIST="+dist, "RELEASE_ARCHES="+arches)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := release(version); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	check := exec.Command("sha256sum", "-c", "checksums.txt")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
	for _, arch := range strings.Fields(arches) {
		name := "skewer_" + version + "_linux_" + arch
		if !strings.Contains(string(sums), name+".tar.gz") {
			t.Errorf("checksums.txt lacks %s: %s", name, sums)
		}
		files := untar(t, filepath.Join(dist, name+".tar.gz"), dist)
		if want := []string{name + "/", name + "/LICENSE", name + "/README.md", name + "/skewer"}; !slices.Equal(files, want) {
			t.Errorf("%s holds %v, want %v", name, files, want)
		}
		bin := filepath.Join(dist, name, "skewer")
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is linked dynamically", name)
			}
		}
		if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
			t.Errorf("%s is built for %s", name, f.Machine)
		}
		f.Close()
		if arch == "amd64" {
			out, err := exec.Command(bin, "version").Output()
			if err != nil || !strings.HasPrefix(string(out), "skewer "+version+" ") {
				t.Errorf("skewer version: %q, %v", out, err)
			}
		}
	}
	if out, err := release(version); err != nil {
		t.Fatalf("make release again: %v\n%s", err, out)
	}
	if again, _ := os.ReadFile(filepath.Join(dist, "checksums.txt")); string(again) != string(sums) {
		t.Errorf("a second build differs:\n%s\n%s", sums, again)
	}
	out, err := release("latest")
	if code := exitCode(err); code != 2 || !strings.Contains(out, "such as v0.4.0") {
		t.Errorf("VERSION=latest: exit %d, %q", code, out)
	}
	if again, _ := os.ReadFile(filepath.Join(dist, "checksums.txt")); string(again) != string(sums) {
		t.Errorf("a refused release changed dist")
	}
}

func exitCode(err error) int {
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// untar extracts the tar.gz at path into dir, checking every entry is
// owned by 0, and returns the entries' names in order.
func untar(t *testing.T, path, dir string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: %s owned by %d:%d", path, h.Name, h.Uid, h.Gid)
		}
		target := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		w, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}
