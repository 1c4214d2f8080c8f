package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// HasImage says whether n's containerd holds ref.
func (n Node) HasImage(ctx context.Context, ref string) (bool, error) {
	held, err := n.images(ctx)
	if err != nil {
		return false, err
	}
	_, ok := held[ref]
	return ok, nil
}

// ShareImages gives each node of to every image of refs it lacks: from
// its tar on the host where tars has one (streamed in, as an in-place
// upgrade loads its images), else copied from a node of c that holds it.
// On a machine with no registry, that is what a pull would fetch. A
// node's image holds its own version's images only, while kubeadm's
// addons may be moved to the other version's (a worker left at the older
// version when the surge upgrades them). An image no node holds is left
// to the kubelet, whose pull says why it failed.
func (c *Cluster) ShareImages(ctx context.Context, to []Node, tars map[string]string, refs ...string) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	held := map[string]heldImages{}
	for _, n := range to {
		if held[n.Name], err = n.images(ctx); err != nil {
			return fmt.Errorf("images of %s: %w", n.Name, err)
		}
	}
	for _, ref := range refs {
		var lacking []Node
		for _, n := range to {
			if _, ok := held[n.Name][ref]; !ok {
				lacking = append(lacking, n)
			}
		}
		if len(lacking) == 0 {
			continue
		}
		if tar, ok := tars[ref]; ok {
			if err := loadImageTars(ctx, lacking, tar); err != nil {
				return err
			}
			continue
		}
		archive, err := c.exportImage(ctx, nodes, ref)
		if err != nil || archive == "" {
			return err
		}
		defer os.RemoveAll(filepath.Dir(archive))
		for _, n := range lacking {
			if err := importArchive(ctx, n, archive); err != nil {
				return fmt.Errorf("failed to give %s to %s: %w", ref, n.Name, err)
			}
		}
	}
	return nil
}

// sharedArchive is where an image archive is put in a node: on its
// root filesystem, which docker cp reaches (a node's /tmp is a tmpfs).
const sharedArchive = "/kind/skewer-share.tar"

// importArchive copies the archive at path (on the host) into n and
// imports it there, pinned, as the node image's own are. A file, not a
// stream through docker exec: under a certification's load a 200 MB
// stream was once cut short. Tried three times.
func importArchive(ctx context.Context, n Node, path string) error {
	var err error
	for range 3 {
		if err = docker.Copy(ctx, path, n.Name, sharedArchive); err == nil {
			_, err = n.Run(ctx, "ctr", "--namespace=k8s.io", "images", "import",
				"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--digests", sharedArchive)
		}
		_, _ = n.Run(ctx, "rm", "-f", sharedArchive)
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// exportImage writes ref as an archive, from the first of nodes that
// holds it, to a file of a new host directory and returns its path; ""
// when no node holds it.
func (c *Cluster) exportImage(ctx context.Context, nodes []Node, ref string) (string, error) {
	for _, n := range nodes {
		has, err := n.HasImage(ctx, ref)
		if err != nil || !has {
			continue
		}
		if _, err := n.Run(ctx, "ctr", "--namespace=k8s.io", "images", "export", "--platform", "linux/amd64", sharedArchive, ref); err != nil {
			return "", fmt.Errorf("failed to export %s from %s: %w", ref, n.Name, err)
		}
		defer n.Run(context.WithoutCancel(ctx), "rm", "-f", sharedArchive)
		dir, err := os.MkdirTemp("", "skewer-share-")
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, "image.tar")
		if err := run.Command("docker", "cp", n.Name+":"+sharedArchive, path).Run(ctx); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("failed to copy %s out of %s: %w", ref, n.Name, err)
		}
		return path, nil
	}
	return "", nil
}
