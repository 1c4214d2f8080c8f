package cluster

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"
)

// LoadImageTarsFor imports into each node's containerd the tars tarsFor
// gives it, pinned, the way the node image preloads them. A
// tar whose image the node already holds - that name, that image ID - is
// skipped: the node image preloaded it, and importing it again copies
// the same bytes (the CNI's 171 MB image is the same at every version).
func (c *Cluster) LoadImageTarsFor(ctx context.Context, tarsFor func(Node) []string) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	return loadImageTarsFor(ctx, nodes, tarsFor)
}

func loadImageTars(ctx context.Context, nodes []Node, tars ...string) error {
	return loadImageTarsFor(ctx, nodes, func(Node) []string { return tars })
}

// loadImageTarsFor imports into two nodes at a time: an import is a
// stream through the Docker API and an unpack, each about half CPU and
// half disk, so two overlap on two cores (a node's ~700 MB took 25-30 s
// alone, session 19) where more would only queue.
func loadImageTarsFor(ctx context.Context, nodes []Node, tarsFor func(Node) []string) error {
	archives := map[string]archiveImage{}
	for _, n := range nodes {
		for _, t := range tarsFor(n) {
			if _, ok := archives[t]; ok {
				continue
			}
			a, err := readArchiveImage(t)
			if err != nil {
				return err
			}
			archives[t] = a
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for _, n := range nodes {
		g.Go(func() error {
			held, err := n.images(ctx)
			if err != nil {
				return fmt.Errorf("images of %s: %w", n.Name, err)
			}
			for _, t := range tarsFor(n) {
				if held.holds(archives[t]) {
					continue
				}
				if err := importTar(ctx, n, t); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func importTar(ctx context.Context, n Node, tar string) error {
	f, err := os.Open(tar)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := n.RunWithInput(ctx, f, "ctr", "--namespace=k8s.io", "images", "import",
		"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--digests", "-"); err != nil {
		return fmt.Errorf("failed to load %s into %s: %w", filepath.Base(tar), n.Name, err)
	}
	return nil
}

// archiveImage is what a docker-archive tar (docker save) holds: its
// names and the image ID, the digest of its config.
type archiveImage struct {
	refs []string
	id   string
}

// readArchiveImage reads the manifest.json of a docker-archive tar of one
// image. The tar is read header by header; a file's contents are skipped
// by seeking, so a 200 MB tar costs a few reads.
func readArchiveImage(path string) (archiveImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return archiveImage{}, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return archiveImage{}, fmt.Errorf("%s: no manifest.json: not a docker-archive tar", path)
		}
		if err != nil {
			return archiveImage{}, fmt.Errorf("%s: %w", path, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var manifest []struct {
			Config   string
			RepoTags []string
		}
		if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
			return archiveImage{}, fmt.Errorf("%s: manifest.json: %w", path, err)
		}
		if len(manifest) != 1 {
			return archiveImage{}, fmt.Errorf("%s: manifest.json lists %d images, want 1", path, len(manifest))
		}
		// docker save writes the config as <hex>.json (Docker < 25) or as
		// blobs/sha256/<hex> (an OCI layout, Docker 25 and later).
		hex := strings.TrimSuffix(strings.TrimPrefix(manifest[0].Config, "blobs/sha256/"), ".json")
		if hex == "" || strings.ContainsAny(hex, "/.") {
			return archiveImage{}, fmt.Errorf("%s: manifest.json: config %q is not a digest", path, manifest[0].Config)
		}
		a := archiveImage{id: "sha256:" + hex}
		for _, ref := range manifest[0].RepoTags {
			a.refs = append(a.refs, normalizedRef(ref))
		}
		return a, nil
	}
}

// normalizedRef is ref as containerd names it: docker save writes
// Docker's short form (kindest/kindnetd:v1, busybox:1), which an import
// expands (docker.io/kindest/kindnetd:v1, docker.io/library/busybox:1).
// A first part with a dot or a colon, or localhost, is a registry.
func normalizedRef(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	switch {
	case !ok:
		return "docker.io/library/" + ref
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return ref
	default:
		return "docker.io/" + ref
	}
}

// heldImages are the images of a node's containerd (namespace k8s.io), by
// name: the digest of the manifest each names. The CRI plugin names every
// image by its ID too (sha256:<config digest>), so a name and an ID that
// point at one manifest are one image.
type heldImages map[string]string

func (n Node) images(ctx context.Context) (heldImages, error) {
	out, err := n.Run(ctx, "ctr", "--namespace=k8s.io", "images", "ls")
	if err != nil {
		return nil, err
	}
	return parseImageList(out), nil
}

// parseImageList reads `ctr images ls`: REF TYPE DIGEST SIZE PLATFORMS LABELS.
func parseImageList(out string) heldImages {
	held := heldImages{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] == "REF" || !strings.HasPrefix(f[2], "sha256:") {
			continue
		}
		held[f[0]] = f[2]
	}
	return held
}

// holds says whether every name of a is in h, as the image with a's ID.
func (h heldImages) holds(a archiveImage) bool {
	manifest, ok := h[a.id]
	if !ok || len(a.refs) == 0 {
		return false
	}
	for _, ref := range a.refs {
		if h[ref] != manifest {
			return false
		}
	}
	return true
}
