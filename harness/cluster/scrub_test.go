package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A proxy's credentials in a node's description do not reach the
// exported evidence; the rest of it is kept as it was.
func TestScrubCredentials(t *testing.T) {
	dir := t.TempDir()
	node := filepath.Join(dir, "logs", "c-control-plane")
	if err := os.MkdirAll(node, 0o755); err != nil {
		t.Fatal(err)
	}
	inspect := `[{"Config":{"Env":["HTTP_PROXY=http://alice:s3cret@proxy.corp:3128","https_proxy=https://tok@proxy.corp","NO_PROXY=localhost,10.0.0.0/8","container=docker"]}}]`
	other := "HTTP_PROXY=http://alice:s3cret@proxy.corp:3128\n"
	if err := os.WriteFile(filepath.Join(node, "inspect.json"), []byte(inspect), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(node, "kubelet.log"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := scrubCredentials(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(node, "inspect.json"))
	for _, secret := range []string{"alice", "s3cret", "tok@"} {
		if strings.Contains(string(got), secret) {
			t.Errorf("%q left in inspect.json: %s", secret, got)
		}
	}
	for _, kept := range []string{"http://***@proxy.corp:3128", "https://***@proxy.corp", "NO_PROXY=localhost,10.0.0.0/8", "container=docker"} {
		if !strings.Contains(string(got), kept) {
			t.Errorf("%q not in the scrubbed inspect.json: %s", kept, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(node, "kubelet.log")); string(b) != other {
		t.Errorf("a file that is no node description changed: %q", b)
	}
}

// A state folder left by a cluster that no longer exists goes, whole;
// a name with none is said to have had none.
func TestRemoveState(t *testing.T) {
	o := Options{StateDir: t.TempDir()}
	left := filepath.Join(o.StateDir, "skewer-ha", "audit", "skewer-ha-control-plane")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.StateDir, "skewer-ha", "rollout.json"), []byte(`{"from":"v1.35.4"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveState("skewer-ha", o)
	if err != nil || !removed {
		t.Fatalf("RemoveState = %v, %v; want the folder removed", removed, err)
	}
	if _, err := os.Stat(filepath.Join(o.StateDir, "skewer-ha")); !os.IsNotExist(err) {
		t.Errorf("the state folder is still there: %v", err)
	}
	if removed, err := RemoveState("skewer-other", o); removed || err != nil {
		t.Errorf("a name with no folder: %v, %v", removed, err)
	}
}
