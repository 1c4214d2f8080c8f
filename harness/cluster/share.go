package cluster

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
)

// hasImage says whether n's containerd holds ref.
func (n Node) hasImage(ctx context.Context, ref string) (bool, error) {
	out, err := n.Run(ctx, "ctr", "--namespace=k8s.io", "images", "ls", "-q", "name=="+ref)
	if err != nil {
		return false, err
	}
	return slices.Contains(strings.Fields(out), ref), nil
}

// ShareImages gives each node of to every image of refs it lacks, copied
// from a node of c that holds it: on a machine with no registry, what a
// pull would fetch. A joining node's image holds its own version's
// images only, while the cluster's DaemonSets may still run the other
// version's (kube-proxy before kubeadm upgrades its addons). An image no
// node holds is left to the kubelet, whose pull says why it failed.
func (c *Cluster) ShareImages(ctx context.Context, to []Node, refs ...string) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		var lacking []Node
		for _, n := range to {
			has, err := n.hasImage(ctx, ref)
			if err != nil {
				return fmt.Errorf("images of %s: %w", n.Name, err)
			}
			if !has {
				lacking = append(lacking, n)
			}
		}
		if len(lacking) == 0 {
			continue
		}
		archive, err := c.exportImage(ctx, nodes, ref)
		if err != nil || archive == nil {
			return err
		}
		for _, n := range lacking {
			if _, err := n.RunWithInput(ctx, bytes.NewReader(archive), "ctr", "--namespace=k8s.io", "images", "import",
				"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--digests", "-"); err != nil {
				return fmt.Errorf("failed to give %s to %s: %w", ref, n.Name, err)
			}
		}
	}
	return nil
}

// exportImage is ref as an archive, from the first of nodes that holds
// it; nil when none does.
func (c *Cluster) exportImage(ctx context.Context, nodes []Node, ref string) ([]byte, error) {
	for _, n := range nodes {
		has, err := n.hasImage(ctx, ref)
		if err != nil || !has {
			continue
		}
		const tmp = "/tmp/skewer-share.tar"
		if _, err := n.Run(ctx, "ctr", "--namespace=k8s.io", "images", "export", "--platform", "linux/amd64", tmp, ref); err != nil {
			return nil, fmt.Errorf("failed to export %s from %s: %w", ref, n.Name, err)
		}
		archive, err := n.ReadFile(ctx, tmp)
		_, _ = n.Run(ctx, "rm", "-f", tmp)
		return archive, err
	}
	return nil, nil
}
