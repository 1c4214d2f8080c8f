package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

func (l layout) removedNodeLogs() string { return filepath.Join(l.dir, "removed-node-logs") }

// removedNodeJournals are what KeepNodeLogs keeps of a node: the files
// kind's export writes of the node's journal (its whole, the kubelet's,
// containerd's), by the unit each reads ("" for the whole journal).
var removedNodeJournals = map[string]string{"journal.log": "", "kubelet.log": "kubelet", "containerd.log": "containerd"}

// KeepNodeLogs keeps a node's journals before it is removed for good (a
// control plane or worker a surge replaces), under the cluster's
// directory: ExportLogs writes them under logs/<node>/ as kind's export
// does for the nodes still there. Without them what happened on a node
// the run replaced - a container's failed start, a kubelet's eviction -
// would have no evidence left by the end of the run. What it cannot read
// it says in keep-errors.txt there, and the removal goes on: evidence is
// not worth a rollout.
func (c *Cluster) KeepNodeLogs(ctx context.Context, node Node) {
	dir := filepath.Join(layout{c.Dir}.removedNodeLogs(), node.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	if err := keepJournals(ctx, node, dir); err != nil {
		_ = os.WriteFile(filepath.Join(dir, "keep-errors.txt"), []byte(err.Error()+"\n"), 0o644)
	}
}

// keepJournals writes node's removedNodeJournals into dir.
func keepJournals(ctx context.Context, node Node, dir string) error {
	var errs []error
	for file, unit := range removedNodeJournals {
		argv := []string{"journalctl", "--no-pager", "--output=short-precise"}
		if unit != "" {
			argv = append(argv, "--unit", unit)
		}
		out, err := node.Run(ctx, argv...)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to read the journal of %s (%s): %w", node.Name, file, err))
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(out+"\n"), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// exportRemovedNodeLogs writes the kept logs of each removed node under
// logs/<node>/ of the export in logs: never over what kind exported of a
// node of the same name still there.
func exportRemovedNodeLogs(kept, logs string) error {
	nodes, err := os.ReadDir(kept)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		to := filepath.Join(logs, n.Name())
		if _, err := os.Stat(to); err == nil {
			continue
		}
		if err := os.MkdirAll(to, 0o755); err != nil {
			return err
		}
		files, err := os.ReadDir(filepath.Join(kept, n.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			body, err := os.ReadFile(filepath.Join(kept, n.Name(), f.Name()))
			if err == nil {
				err = os.WriteFile(filepath.Join(to, f.Name()), body, 0o644)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
