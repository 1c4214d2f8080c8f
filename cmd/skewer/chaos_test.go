package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/internal/run"
	"github.com/skewer-k8s/skewer/internal/source"
)

// A skewer killed with SIGKILL in the middle of a create - no handler
// runs: its process group is killed as a CI runner's cancel ends a job -
// leaves only what `skewer down NAME` removes, and the same command run
// again succeeds: the machine's containers, networks and skewer's state
// folders as they were before. Each point of the create it is killed at
// is a line of its progress: the node containers being made, kubeadm
// init under way, the CNI being installed.
func TestSIGKILLThenDownThenAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a kind cluster several times: not with -short")
	}
	ctx := needDocker(t)
	root, err := source.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "skewer")
	if err := (&run.Cmd{Args: []string{"go", "build", "-o", bin, "./cmd/skewer"}, Dir: root}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The smallest cluster skewer makes: one control plane.
	const name = "skewer-chaos"
	profile := filepath.Join(dir, "chaos.yaml")
	if err := os.WriteFile(profile, []byte("name: "+name+"\ncontrolPlanes: 1\nworkers: 0\nversion: v1.36.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := []string{"up", "--profile", profile, "--image-source", "local"}
	down := []string{"down", "--name", name}
	before := machine(ctx, t)
	for _, at := range []string{"Preparing nodes", "Starting control-plane", "Installing CNI"} {
		start := time.Now()
		if !killedAt(t, bin, up, at) {
			t.Fatalf("skewer up ended before %q", at)
		}
		left := machine(ctx, t)
		if out, err := exec.CommandContext(ctx, bin, down...).CombinedOutput(); err != nil {
			t.Fatalf("skewer down after SIGKILL at %q: %v: %s", at, err, out)
		}
		if after := machine(ctx, t); !slices.Equal(after, before) {
			t.Errorf("killed at %q and taken down: %v, before %v", at, after, before)
		}
		t.Logf("killed at %q after %s: left %d thing(s) skewer down removed", at, time.Since(start).Round(time.Second), len(left)-len(before))
	}
	// The same command again, to the end, on the machine as it was.
	if out, err := exec.CommandContext(ctx, bin, up...).CombinedOutput(); err != nil {
		t.Fatalf("skewer up after the kills: %v: %s", err, lastLines(string(out), 20))
	}
	if out, err := exec.CommandContext(ctx, bin, down...).CombinedOutput(); err != nil {
		t.Fatalf("skewer down: %v: %s", err, out)
	}
	if after := machine(ctx, t); !slices.Equal(after, before) {
		t.Errorf("after up and down: %v, before %v", after, before)
	}
}

// killedAt runs bin with args in a process group of its own and kills
// the group with SIGKILL when a line of its output contains at; false
// when it ended first.
func killedAt(t *testing.T, bin string, args []string, at string) bool {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if !killed && strings.Contains(lines.Text(), at) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			killed = true
		}
	}
	_ = cmd.Wait()
	return killed
}

// machine is what a run could leave on this machine: every container and
// network of the engine, and skewer's state folders.
func machine(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var out []string
	for _, args := range [][]string{
		{"docker", "ps", "-a", "--format", "container {{.Names}}"},
		{"docker", "network", "ls", "--format", "network {{.Name}}"},
	} {
		list, err := run.Command(args...).String(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, line)
			}
		}
	}
	states, _ := filepath.Glob(filepath.Join(cluster.StateDir(), "*"))
	for _, s := range states {
		out = append(out, "state "+filepath.Base(s))
	}
	slices.Sort(out)
	return out
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
