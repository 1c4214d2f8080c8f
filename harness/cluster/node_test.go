package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// nodeImage is a node image built here; the test skips without an engine
// or an image.
func nodeImage(t *testing.T) string {
	ctx := context.Background()
	if err := docker.Ping(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	images, err := run.Command("docker", "images", "skewer.local/node", "--format", "{{.Repository}}:{{.Tag}}").String(ctx)
	if err != nil || images == "" {
		t.Skipf("no node image built yet (make images): %v", err)
	}
	return strings.Fields(images)[0]
}

// A node container started as kind starts one is waited for until its
// systemd has booted, from the moment docker run returns (kind's
// entrypoint still running, systemd not yet there).
func TestWaitSystemd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n := startSystemdNode(ctx, t)
	start := time.Now()
	if err := waitSystemd(ctx, n); err != nil {
		t.Fatal(err)
	}
	if state, _ := n.Run(ctx, "systemctl", "is-system-running"); state != "running" && state != "degraded" {
		t.Errorf("waited %s, and systemd is %q", time.Since(start).Round(100*time.Millisecond), state)
	}
}

// startSystemdNode runs a container of a node image as kind does, its
// systemd booting; it is removed when the test ends.
func startSystemdNode(ctx context.Context, t *testing.T) Node {
	image := nodeImage(t)
	name := fmt.Sprintf("skewer-test-systemd-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = docker.Remove(context.Background(), name) })
	if err := run.Command("docker", "run", "-d", "--name", name, "--privileged", "--security-opt", "seccomp=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var", "--volume", "/lib/modules:/lib/modules:ro",
		"--cgroupns=private", image).Run(ctx); err != nil {
		t.Fatal(err)
	}
	return Node{Name: name}
}

// The kubelet is restarted once, and only once the processes given have
// exited: here a kubelet unit that records each start, and a process that
// records its exit two seconds on.
func TestRestartKubeletOnceExited(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n := startSystemdNode(ctx, t)
	if err := waitSystemd(ctx, n); err != nil {
		t.Fatal(err)
	}
	must := func(argv ...string) string {
		out, err := n.Run(ctx, argv...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := n.WriteFile(ctx, "/etc/systemd/system/kubelet.service.d/99-test.conf", []byte(
		"[Service]\nExecStart=\nExecStart=/bin/sh -c 'date +%%s.%%N >> /tmp/kubelet-starts; exec sleep infinity'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The unit's condition: kind starts no kubelet before kubeadm's config.
	if err := n.WriteFile(ctx, "/var/lib/kubelet/config.yaml", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	must("systemctl", "daemon-reload")
	must("systemctl", "restart", "kubelet")
	pid := must("sh", "-c", `sh -c 'sleep 2; date +%s.%N > /tmp/exited' >/dev/null 2>&1 & echo $!`)
	if err := RestartKubeletOnceExited(ctx, n, []string{pid}); err != nil {
		t.Fatal(err)
	}
	starts := strings.Fields(must("cat", "/tmp/kubelet-starts"))
	exited, _ := n.Run(ctx, "cat", "/tmp/exited")
	if len(starts) != 2 {
		t.Fatalf("kubelet started %d times, want 2 (the test's own start, then the restart): %v", len(starts), starts)
	}
	if exited == "" || starts[1] < exited {
		t.Errorf("kubelet restarted at %s, before the process exited (at %q)", starts[1], exited)
	}
}

// Files written into a node and copied between nodes, in real containers
// of a node image: content, mode and the parent folders made; a write
// that fails leaves no temporary file; a copy keeps each file's mode.
func TestWriteFileAndCopyFiles(t *testing.T) {
	ctx := context.Background()
	image := nodeImage(t)
	start := func() Node {
		name := fmt.Sprintf("skewer-test-files-%d", time.Now().UnixNano())
		t.Cleanup(func() { _ = docker.Remove(context.Background(), name) })
		// /small: a file system that fills after a file has begun.
		if err := run.Command("docker", "run", "-d", "--name", name, "--tmpfs", "/small:size=16k", "--entrypoint", "sleep", image, "infinity").Run(ctx); err != nil {
			t.Fatal(err)
		}
		return Node{Name: name}
	}
	from, to := start(), start()
	look := func(n Node, argv ...string) string {
		out, err := n.Run(ctx, argv...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	if err := from.WriteFile(ctx, "/etc/skewer-test/deep/key", []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := from.WriteFile(ctx, "/etc/skewer-test/cert", []byte("public\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := look(from, "stat", "-c", "%a %s %n", "/etc/skewer-test/deep/key", "/etc/skewer-test/cert"); got != "600 7 /etc/skewer-test/deep/key\n644 7 /etc/skewer-test/cert" {
		t.Errorf("written: %q", got)
	}
	if got := look(from, "ls", "-a", "/etc/skewer-test/deep"); got != ".\n..\nkey" {
		t.Errorf("the folder keeps %q", got)
	}
	// A write that fails half way names the file and leaves nothing.
	if err := from.WriteFile(ctx, "/small/big", make([]byte, 1<<20), 0o644); err == nil || !strings.Contains(err.Error(), "/small/big") {
		t.Errorf("a write larger than its file system: %v", err)
	}
	if got := look(from, "ls", "-a", "/small"); got != ".\n.." {
		t.Errorf("a failed write left %q", got)
	}

	if err := CopyFiles(ctx, from, to, "/etc/skewer-test/deep/key", "/etc/skewer-test/cert"); err != nil {
		t.Fatal(err)
	}
	if got := look(to, "sh", "-c", `stat -c "%a %n" "$@" && cat "$@"`, "sh", "/etc/skewer-test/deep/key", "/etc/skewer-test/cert"); got != "600 /etc/skewer-test/deep/key\n644 /etc/skewer-test/cert\nsecret\npublic" {
		t.Errorf("copied: %q", got)
	}
	if err := CopyFiles(ctx, from, to, "etc/skewer-test/cert"); err == nil {
		t.Error("a relative path was copied")
	}
	if err := CopyFiles(ctx, from, to, "/etc/skewer-test/none"); err == nil || !strings.Contains(err.Error(), from.Name) {
		t.Errorf("a missing file: %v", err)
	}
}
