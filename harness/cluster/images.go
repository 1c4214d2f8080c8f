package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
)

// NodeImages are the node images a cluster's nodes start from, by
// version, where they are not skewer's own builds (nodeimage.Ref): a
// vendor's image, or one built around a vendor's release. They are kept
// in the cluster's directory, so a rollout or rollback in a later
// process starts its nodes from the same images as the first.
type NodeImages map[version.Version]string

// For is v's node image: the one recorded for it, else skewer's build.
func (m NodeImages) For(v version.Version) string {
	if ref, ok := m[v]; ok {
		return ref
	}
	return nodeimage.Ref(v)
}

func (l layout) nodeImages() string { return filepath.Join(l.dir, "node-images.json") }

func loadNodeImages(l layout) (NodeImages, error) {
	raw, err := os.ReadFile(l.nodeImages())
	if errors.Is(err, os.ErrNotExist) {
		return NodeImages{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := NodeImages{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", l.nodeImages(), err)
	}
	return m, nil
}

func (m NodeImages) save(l layout) error {
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(l.nodeImages(), raw, 0o644)
}

// NodeImage is the image a node of version v of this cluster starts from.
func (c *Cluster) NodeImage(v version.Version) string { return c.images.For(v) }

// UseNodeImage records ref as v's node image for every node started from
// now on, by this process or a later one. skewer's own build of v needs
// no record.
func (c *Cluster) UseNodeImage(v version.Version, ref string) error {
	if c.images.For(v) == ref {
		return nil
	}
	if c.images == nil {
		c.images = NodeImages{}
	}
	c.images[v] = ref
	return c.images.save(layout{c.Dir})
}
