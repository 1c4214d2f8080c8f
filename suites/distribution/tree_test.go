package distribution

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
)

// A vendor's source tree is built into a node image that says what it
// is. The tree is made here with no network but the Go module proxy: the
// k8s.io/kubernetes module with its staging modules put back where a
// checkout keeps them, committed and tagged v1.36.3-acme.3 in git. A full
// build of Kubernetes from source (~8 min on 2 cores): `make suites` runs
// it, make e2e does not.
func TestASourceTreeBuildsANodeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Kubernetes from a source tree: not with -short")
	}
	g := NewWithT(t)
	ctx := context.Background()
	tree := filepath.Join(t.TempDir(), "kubernetes")
	kube := download(t, "k8s.io/kubernetes@"+module.String())
	sh := func(args ...string) {
		t.Helper()
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%v: %s", args, out)
	}
	// The module cache keeps its files read-only; a checkout is writable.
	sh("cp", "-r", kube.Dir, tree)
	sh("chmod", "-R", "u+w", tree)
	goMod, err := os.ReadFile(filepath.Join(tree, "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	// The module proxy serves the staging modules apart: put each back.
	g.Expect(os.MkdirAll(filepath.Join(tree, "staging", "src", "k8s.io"), 0o755)).To(Succeed())
	for _, line := range strings.Split(string(goMod), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasPrefix(f[0], "k8s.io/") && f[1] == "v0.0.0" {
			staging := download(t, f[0]+"@"+stagingVersion())
			sh("cp", "-r", staging.Dir, filepath.Join(tree, "staging", "src", f[0]))
		}
	}
	sh("chmod", "-R", "u+w", tree)
	// The checkout's go.work names staging modules the proxy does not
	// serve, and its vendor/ is not in the module: build in module mode.
	g.Expect(os.Remove(filepath.Join(tree, "go.work"))).To(Succeed())
	_ = os.Remove(filepath.Join(tree, "go.work.sum"))
	t.Setenv("GOFLAGS", "-mod=mod")
	g.Expect(os.WriteFile(filepath.Join(tree, "ACME-PATCHES"), []byte("acme's build of v1.36.3\n"), 0o644)).To(Succeed())
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "acme v1.36.3-acme.3"}, {"tag", "v1.36.3-acme.3"}} {
		cmd := exec.Command("git", append([]string{"-C", tree, "-c", "user.name=acme", "-c", "user.email=build@acme.example", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "git %v: %s", args, out)
	}

	rel, err := nodeimage.OpenRelease(ctx, tree, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	want := version.MustParse("v1.36.3-acme.3")
	g.Expect(rel.Version).To(Equal(want))
	g.Expect(rel.Kind()).To(Equal("source-tree"))
	g.Expect(rel.Dirty).To(BeFalse())
	art, err := (&nodeimage.Builder{Out: testWriter{t}}).BuildRelease(ctx, rel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Binaries).To(HaveLen(7))
	got, err := nodeimage.ImageVersion(ctx, art.NodeImage)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "the node image %s carries the tree's version", art.NodeImage)
	out, err := exec.Command(filepath.Join(art.BinDir, "kube-apiserver"), "--version").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(string(out))).To(Equal("Kubernetes " + want.String()))
	t.Logf("%s: node image %s, commit %s", tree, art.NodeImage, rel.Commit)
}

func stagingVersion() string {
	return "v0." + strings.TrimPrefix(module.String(), "v1.")
}

type modInfo struct{ Dir, GoMod, Error string }

func download(t *testing.T, mod string) modInfo {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", mod).Output()
	var info modInfo
	if jerr := json.Unmarshal(out, &info); jerr != nil || info.Error != "" || err != nil {
		t.Fatalf("go mod download %s: %v %v %s", mod, err, jerr, info.Error)
	}
	return info
}
