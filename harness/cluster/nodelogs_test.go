package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// The journals kept of a removed node land under logs/<node>/ of the
// export, beside kind's; a node still there keeps what kind exported.
func TestExportRemovedNodeLogs(t *testing.T) {
	kept, logs := t.TempDir(), t.TempDir()
	write := func(path, body string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(kept, "worker", "kubelet.log"), "StartError: unable to freeze\n")
	write(filepath.Join(kept, "worker", "journal.log"), "all of it\n")
	write(filepath.Join(kept, "cp2", "journal.log"), "kept before an earlier removal\n")
	write(filepath.Join(logs, "cp2", "journal.log"), "kind's export\n")
	if err := exportRemovedNodeLogs(kept, logs); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"worker/kubelet.log": "StartError: unable to freeze\n", "worker/journal.log": "all of it\n", "cp2/journal.log": "kind's export\n"} {
		if got, err := os.ReadFile(filepath.Join(logs, path)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	if err := exportRemovedNodeLogs(filepath.Join(kept, "none"), logs); err != nil {
		t.Errorf("no node removed: %v", err)
	}
}
