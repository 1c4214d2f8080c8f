package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
)

// Record is what a rollout leaves in the cluster's directory, so that a
// rollback knows where to return, even from another process after Ctrl-C.
type Record struct {
	From     version.Version `json:"from"`
	To       version.Version `json:"to"`
	Strategy Strategy        `json:"strategy"`
	// ControlPlanes is how many there were when the rollout began: a
	// rollback ends with as many.
	ControlPlanes int `json:"controlPlanes"`
}

// Validate refuses a record a rollback could not act on.
func (r *Record) Validate() error {
	switch {
	case r.From.IsZero():
		return errors.New("no version it started from")
	case r.To.IsZero():
		return errors.New("no version it went to")
	case r.ControlPlanes < 1:
		return fmt.Errorf("%d control planes", r.ControlPlanes)
	}
	_, err := ParseStrategy(string(r.Strategy))
	return err
}

func recordPath(c *cluster.Cluster) string { return filepath.Join(c.Dir, "rollout.json") }

// LoadRecord reads the record of the cluster's last rollout: nil when
// there is none; an error that says so when it cannot be trusted.
func LoadRecord(c *cluster.Cluster) (*Record, error) {
	path := recordPath(c)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the rollout record: %w", err)
	}
	var r Record
	err = json.Unmarshal(raw, &r)
	if err == nil {
		err = r.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("the rollout record %s is corrupt (%v): remove it and say where to return with --to", path, err)
	}
	return &r, nil
}

// save writes the record atomically: a Ctrl-C never leaves half of it.
func (r *Record) save(c *cluster.Cluster) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := recordPath(c) + ".tmp"
	if err := os.WriteFile(tmp, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("failed to write the rollout record: %w", err)
	}
	if err := os.Rename(tmp, recordPath(c)); err != nil {
		return fmt.Errorf("failed to write the rollout record: %w", err)
	}
	return nil
}

func removeRecord(c *cluster.Cluster) error {
	if err := os.Remove(recordPath(c)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to remove the rollout record: %w", err)
	}
	return nil
}
