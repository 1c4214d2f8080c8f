package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/run"
)

// writeArchive writes files, in order, as a tar at path.
func writeArchive(t *testing.T, path string, files [][2]string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readArchive(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(b)
	}
}

// Every place docker save names an image - manifest.json, repositories and
// (Docker 25+) the OCI index - names the new name afterwards and never the
// old; layers and configs are copied byte for byte.
func TestRenameInArchive(t *testing.T) {
	const host = "skewer.local/registry.k8s.io/kube-apiserver:v1.36.3"
	const node = "registry.k8s.io/kube-apiserver:v1.36.3"
	layer := strings.Repeat("layer bytes ", 100)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.tar"), filepath.Join(dir, "dst.tar")
	writeArchive(t, src, [][2]string{
		{"blobs/sha256/aa", layer},
		{"index.json", `{"schemaVersion":2,"manifests":[{"digest":"sha256:bb","annotations":{"io.containerd.image.name":"` + host + `","org.opencontainers.image.ref.name":"v1.36.3"}}]}`},
		{"manifest.json", `[{"Config":"blobs/sha256/cc","RepoTags":["` + host + `"],"Layers":["blobs/sha256/aa"]}]`},
		{"repositories", `{"skewer.local/registry.k8s.io/kube-apiserver":{"v1.36.3":"cc"}}`},
	})
	if err := RenameInArchive(src, dst, host, node); err != nil {
		t.Fatal(err)
	}
	got := readArchive(t, dst)
	if got["blobs/sha256/aa"] != layer {
		t.Errorf("the layer changed")
	}
	for _, name := range []string{"index.json", "manifest.json", "repositories"} {
		if strings.Contains(got[name], "skewer.local") {
			t.Errorf("%s still names the host's image: %s", name, got[name])
		}
	}
	if !strings.Contains(got["manifest.json"], `"RepoTags":["`+node+`"]`) {
		t.Errorf("manifest.json: %s", got["manifest.json"])
	}
	if got["repositories"] != `{"registry.k8s.io/kube-apiserver":{"v1.36.3":"cc"}}` {
		t.Errorf("repositories: %s", got["repositories"])
	}
	if !strings.Contains(got["index.json"], `"io.containerd.image.name":"`+node+`"`) || !strings.Contains(got["index.json"], `"schemaVersion":2`) {
		t.Errorf("index.json: %s", got["index.json"])
	}

	// An archive of another image is refused, and nothing is written.
	other := filepath.Join(dir, "other.tar")
	if err := RenameInArchive(src, other, "skewer.local/registry.k8s.io/etcd:3.6.5-0", node); err == nil {
		t.Errorf("an archive that never names the image was renamed")
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a refused rename left %s: %v", other, err)
	}
	if err := RenameInArchive(src, other, "skewer.local/untagged", node); err == nil {
		t.Errorf("a name without a tag was taken")
	}
}

// SaveAs on a real engine: the archive, loaded back, holds the image under
// the new name with the same ID.
func TestSaveAsLoadsUnderTheNewName(t *testing.T) {
	ctx := context.Background()
	if err := run.Command("docker", "info").Run(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	n := time.Now().UnixNano()
	host := fmt.Sprintf("skewer.local/test-saveas/registry.k8s.io/pause:%d", n)
	node := fmt.Sprintf("skewer.local/test-saveas-node:%d", n)
	for _, ref := range []string{host, node} {
		t.Cleanup(func() { _ = run.Command("docker", "image", "rm", "-f", ref).Run(context.Background()) })
	}
	if err := ImportFiles(ctx, host, map[string]string{"pause": "not really"}); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(t.TempDir(), "pause.tar")
	if err := SaveAs(ctx, host, node, tar); err != nil {
		t.Fatal(err)
	}
	if err := run.Command("docker", "load", "-i", tar).Run(ctx); err != nil {
		t.Fatal(err)
	}
	want, err := ImageID(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ImageID(ctx, node); err != nil || got != want {
		t.Errorf("loaded %s as %q (%v), want the saved image %s", node, got, err, want)
	}
}
