package nodeimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/version"
)

func TestRequiredPlaceholdersFindsStagingModules(t *testing.T) {
	p := filepath.Join(t.TempDir(), "go.mod")
	os.WriteFile(p, []byte(`module k8s.io/kubernetes

require (
	github.com/foo/bar v1.2.3
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0 // indirect
)

require k8s.io/kubelet v0.0.0

replace k8s.io/api => ./staging/src/k8s.io/api
`), 0o644)
	got, err := requiredPlaceholders(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "k8s.io/api,k8s.io/client-go,k8s.io/kubelet" {
		t.Fatalf("got %v", got)
	}
}

func TestWrapperGoModIsStable(t *testing.T) {
	gb := goBuild{
		Require: map[string]string{"k8s.io/kubernetes": "v1.36.3"},
		Replace: map[string]string{"k8s.io/client-go": "v0.36.3", "k8s.io/api": "v0.36.3"},
	}
	want := "module skewer.local/build\n\ngo 1.26\n\nrequire (\n\tk8s.io/kubernetes v1.36.3\n)\n\nreplace (\n\tk8s.io/api => k8s.io/api v0.36.3\n\tk8s.io/client-go => k8s.io/client-go v0.36.3\n)\n"
	for i := 0; i < 5; i++ { // map order must not leak into the file
		if got := wrapperGoMod(gb); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	}
}

func TestKubeVersionLDFlagsSetBothVersionPackages(t *testing.T) {
	flags := strings.Join(moduleBuild(version.MustParse("v1.36.3"), "2026-01-01T00:00:00Z").ldflags(), " ")
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.36.3",
		"-X k8s.io/client-go/pkg/version.gitVersion=v1.36.3",
		"-X k8s.io/component-base/version.gitMinor=36",
		"-X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z",
		"-X k8s.io/component-base/version.gitCommit=go-module-proxy-k8s.io-kubernetes-v1.36.3",
		"-X k8s.io/client-go/pkg/version.gitTreeState=archive",
	} {
		if !strings.Contains(flags, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestStaticImageLayerIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "etcd")
	os.WriteFile(bin, []byte("not really etcd"), 0o755)
	img := staticImage{ref: "x", files: map[string]string{"/usr/local/bin/etcd": bin, "/usr/local/bin/etcdctl": bin}}
	var a, b bytes.Buffer
	if err := img.tar(&a); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(bin, time.Unix(1, 0), time.Unix(1, 0)) // host mtimes must not reach the layer
	if err := img.tar(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same inputs gave different layers")
	}
	var names []string
	tr := tar.NewReader(&a)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	want := "etc/,tmp/,usr/,usr/local/,usr/local/bin/,etc/group,etc/passwd,usr/local/bin/etcd,usr/local/bin/etcdctl"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("layer holds %s, want %s", got, want)
	}
}

func TestCacheKeyChangesWithEveryInput(t *testing.T) {
	base := cacheKey("kubernetes", "v1.36.3")
	for _, other := range []string{cacheKey("kubernetes", "v1.36.1"), cacheKey("kubernetes", "v1.36.3", ""), cacheKey("kubernetesv1.36.3")} {
		if other == base {
			t.Fatalf("distinct inputs share key %s", base)
		}
	}
	if cacheKey("kubernetes", "v1.36.3") != base {
		t.Fatal("the same inputs must give the same key")
	}
}

func TestRefAndSource(t *testing.T) {
	if got := Ref(version.MustParse("1.36.3")); got != "skewer.local/node:v1.36.3" {
		t.Fatalf("Ref(1.36.3) = %q", got)
	}
	if _, err := ParseSource("registry"); err == nil {
		t.Error("unknown image source accepted")
	}
}

// debootstrap always verifies the archive: it is given Debian's keyring
// and told to check, and without the keyring nothing runs.
func TestDebootstrapVerifiesTheArchive(t *testing.T) {
	keyring := filepath.Join(t.TempDir(), "debian-archive-keyring.gpg")
	if _, err := debootstrapArgs("/tmp/rootfs", []string{"systemd"}, keyring); err == nil || !strings.Contains(err.Error(), "debian-archive-keyring") {
		t.Errorf("no keyring: %v, want a refusal that names the package", err)
	}
	if err := os.WriteFile(keyring, []byte("keys"), 0o644); err != nil {
		t.Fatal(err)
	}
	args, err := debootstrapArgs("/tmp/rootfs", []string{"systemd"}, keyring)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--keyring=" + keyring, "--force-check-gpg"} {
		if !slices.Contains(args, want) {
			t.Errorf("debootstrap %v: no %s", args, want)
		}
	}
	if slices.Contains(args, "--no-check-gpg") {
		t.Errorf("debootstrap %v skips the check", args)
	}
}
