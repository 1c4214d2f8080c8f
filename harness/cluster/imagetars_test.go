package cluster

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeArchive writes a tar laid out as docker save lays one out: the
// layers first, manifest.json near the end.
func writeArchive(t *testing.T, manifest string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	layer := strings.Repeat("x", 1<<20)
	for _, file := range [][2]string{{"abc/layer.tar", layer}, {"manifest.json", manifest}, {"repositories", "{}"}} {
		name, body := file[0], file[1]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadArchiveImage(t *testing.T) {
	for _, tc := range []struct {
		manifest string
		want     archiveImage
		err      string
	}{
		{manifest: `[{"Config":"bd51.json","RepoTags":["kindest/kindnetd:skewer-4e34"],"Layers":["abc/layer.tar"]}]`,
			want: archiveImage{refs: []string{"docker.io/kindest/kindnetd:skewer-4e34"}, id: "sha256:bd51"}},
		{manifest: `[{"Config":"blobs/sha256/8497","RepoTags":["registry.k8s.io/pause:3.10.1","busybox:1"]}]`,
			want: archiveImage{refs: []string{"registry.k8s.io/pause:3.10.1", "docker.io/library/busybox:1"}, id: "sha256:8497"}},
		{manifest: `[{"Config":"ab.json","RepoTags":["localhost:5000/a:1"]}]`,
			want: archiveImage{refs: []string{"localhost:5000/a:1"}, id: "sha256:ab"}},
		{manifest: `[{"Config":"a.json"},{"Config":"b.json"}]`, err: "lists 2 images"},
		{manifest: `[{"Config":"../etc/passwd"}]`, err: "not a digest"},
		{manifest: `{`, err: "manifest.json"},
	} {
		got, err := readArchiveImage(writeArchive(t, tc.manifest))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.manifest, err, tc.err)
			}
			continue
		}
		if err != nil || got.id != tc.want.id || strings.Join(got.refs, ",") != strings.Join(tc.want.refs, ",") {
			t.Errorf("%s: got %+v, %v; want %+v", tc.manifest, got, err, tc.want)
		}
	}

	notArchive := filepath.Join(t.TempDir(), "x.tar")
	tw := tar.NewWriter(must(os.Create(notArchive)))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := readArchiveImage(notArchive); err == nil || !strings.Contains(err.Error(), "no manifest.json") {
		t.Errorf("a tar without manifest.json: error %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The listing of a kind node's containerd, as ctr prints it (a node of
// v1.35.4 at the mixed window), shortened to what is read.
const nodeImages = `REF                                                                                   TYPE                                                 DIGEST                                                                  SIZE      PLATFORMS   LABELS
docker.io/kindest/kindnetd:skewer-4e3404067467                                        application/vnd.docker.distribution.manifest.v2+json sha256:192151df13581eb8b8921b83e388f3f74b1cf5040683b5c146133b11852f3b16 163.3 MiB linux/amd64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned
registry.k8s.io/kube-proxy:v1.35.4                                                    application/vnd.docker.distribution.manifest.v2+json sha256:0e730c7f79e43d00f3b3d3ee11e2b2eb0f7987d160f02fe6246acd79282b3b9c 203.5 MiB linux/amd64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned
registry.k8s.io/pause:3.10                                                            application/vnd.docker.distribution.manifest.v2+json sha256:a3888502cbc18da8b16710bb29204de0c8248e8d6add578bcaef39b884a37448 736.0 KiB linux/amd64 io.cri-containerd.image=managed
registry.k8s.io/pause:3.10.1                                                          application/vnd.docker.distribution.manifest.v2+json sha256:a3888502cbc18da8b16710bb29204de0c8248e8d6add578bcaef39b884a37448 736.0 KiB linux/amd64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned
sha256:8497d87740203fc1bdbeeff83fdb0ada90306f6f08c22fa801b899c5abba40f2               application/vnd.docker.distribution.manifest.v2+json sha256:a3888502cbc18da8b16710bb29204de0c8248e8d6add578bcaef39b884a37448 736.0 KiB linux/amd64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned
sha256:bd5116aa556155c4c93239dbf32f2ad0d2dfbb18617332697587b1580bc4756a               application/vnd.docker.distribution.manifest.v2+json sha256:192151df13581eb8b8921b83e388f3f74b1cf5040683b5c146133b11852f3b16 163.3 MiB linux/amd64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned
`

func TestHeldImagesSkipOnlyTheSameImage(t *testing.T) {
	held := parseImageList(nodeImages)
	for _, tc := range []struct {
		what string
		a    archiveImage
		want bool
	}{
		{"the CNI image the node image preloaded", archiveImage{refs: []string{"docker.io/kindest/kindnetd:skewer-4e3404067467"}, id: "sha256:bd5116aa556155c4c93239dbf32f2ad0d2dfbb18617332697587b1580bc4756a"}, true},
		{"pause under both its names", archiveImage{refs: []string{"registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10.1"}, id: "sha256:8497d87740203fc1bdbeeff83fdb0ada90306f6f08c22fa801b899c5abba40f2"}, true},
		{"a name the node holds as another image", archiveImage{refs: []string{"docker.io/kindest/kindnetd:skewer-4e3404067467"}, id: "sha256:8497d87740203fc1bdbeeff83fdb0ada90306f6f08c22fa801b899c5abba40f2"}, false},
		{"an image whose ID the node does not list", archiveImage{refs: []string{"registry.k8s.io/kube-proxy:v1.35.4"}, id: "sha256:f8e4"}, false},
		{"an image the node lacks", archiveImage{refs: []string{"registry.k8s.io/kube-proxy:v1.36.3"}, id: "sha256:bd5116aa556155c4c93239dbf32f2ad0d2dfbb18617332697587b1580bc4756a"}, false},
		{"one name of two held", archiveImage{refs: []string{"registry.k8s.io/pause:3.10.1", "registry.k8s.io/pause:3.10.2"}, id: "sha256:8497d87740203fc1bdbeeff83fdb0ada90306f6f08c22fa801b899c5abba40f2"}, false},
		{"an image without a name", archiveImage{id: "sha256:8497d87740203fc1bdbeeff83fdb0ada90306f6f08c22fa801b899c5abba40f2"}, false},
	} {
		if got := held.holds(tc.a); got != tc.want {
			t.Errorf("%s: holds = %v, want %v", tc.what, got, tc.want)
		}
	}
}
