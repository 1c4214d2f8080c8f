package audit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func event(id string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id + `","stage":"ResponseComplete","verb":"get"}` + "\n"
}

// A log the apiserver rotated is read whole: its backups first, oldest
// first, then the current file - the run's first events are not lost to
// the rotation.
func TestReadFollowsRotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "control-plane")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"audit-2026-12-04T22-24-43.123.log": event("a"),
		"audit-2026-12-04T22-31-02.004.log": event("b"),
		"audit.log":                         event("c"),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := Read(filepath.Join(dir, "audit.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, e := range evs {
		got += string(e.AuditID)
	}
	if got != "abc" {
		t.Errorf("events read in the order %q, want abc: the backups, oldest first, then the current log", got)
	}
	final, err := Final([]string{filepath.Join(dir, "audit.log")}, []string{"a"})
	if err != nil || len(final["a"]) != 1 {
		t.Errorf("the final stage of a request logged before the rotation: %v, %v", final, err)
	}
}

// A log that is not there is said so, as fs.ErrNotExist (Final skips it).
func TestReadMissing(t *testing.T) {
	_, err := Read(filepath.Join(t.TempDir(), "audit.log"), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing log: %v", err)
	}
}
