package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/internal/run"
	"github.com/skewer-k8s/skewer/internal/source"
)

// A skewer killed with SIGKILL in the middle of a create - no handler
// runs: its process group is killed as a CI runner's cancel ends a job -
// leaves only what `skewer down NAME` removes, and the same command run
// again succeeds: the machine's containers, networks and skewer's state
// folders as they were before. Each point of the create it is killed at
// is a line of its progress: the node containers being made, kubeadm
// init under way, the CNI being installed. The cluster the last up makes
// has one control plane: there `skewer rollout` is refused
// (rolloutsRefused) before the cluster is taken down.
func TestSIGKILLThenDownThenAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a kind cluster several times: not with -short")
	}
	ctx := needDocker(t)
	bin := skewerBinary(ctx, t)
	// The smallest cluster skewer makes: one control plane, at the older
	// version, so that a rollout to the newer would be a real one.
	const name = "skewer-chaos"
	profile := filepath.Join(t.TempDir(), "chaos.yaml")
	if err := os.WriteFile(profile, []byte("name: "+name+"\ncontrolPlanes: 1\nworkers: 0\nversion: v1.35.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := []string{"up", "--profile", profile, "--image-source", "local"}
	down := []string{"down", "--name", name}
	before := machine(ctx, t)
	// Whatever ends the test, nothing of it stays (a down of nothing fails, unheard).
	t.Cleanup(func() { _ = exec.Command(bin, down...).Run() })
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
	rolloutsRefused(ctx, t, bin, name)
	if out, err := exec.CommandContext(ctx, bin, down...).CombinedOutput(); err != nil {
		t.Fatalf("skewer down: %v: %s", err, out)
	}
	if after := machine(ctx, t); !slices.Equal(after, before) {
		t.Errorf("after up and down: %v, before %v", after, before)
	}
}

// rolloutsRefused: `skewer rollout` of each strategy, on the cluster name
// whose one control plane is not HA, fails naming that, and changes
// nothing: the node containers (each one's start time), the version
// its node carries, the version ClusterConfiguration names, and the
// files of skewer's state folder for it (a refused rollout leaves no
// record to resume) are what they were.
func rolloutsRefused(ctx context.Context, t *testing.T, bin, name string) {
	t.Helper()
	cp := name + "-control-plane"
	look := func() string {
		ids, err := run.Command("docker", "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+name).String(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, args := range [][]string{
			append([]string{"docker", "inspect", "-f", "{{.Name}} {{.State.StartedAt}}"}, strings.Fields(ids)...),
			{"docker", "exec", cp, "cat", "/kind/version"},
			{"docker", "exec", cp, "kubectl", "--kubeconfig=/etc/kubernetes/admin.conf", "-n", "kube-system",
				"get", "configmap", "kubeadm-config", "-o", "jsonpath={.data.ClusterConfiguration}"},
		} {
			out, err := run.Command(args...).String(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(out + "\n")
		}
		files, _ := filepath.Glob(filepath.Join(cluster.StateDir(), name, "*"))
		b.WriteString(strings.Join(files, "\n"))
		return b.String()
	}
	before := look()
	for _, strategy := range []string{"surge", "in-place"} {
		out, err := exec.CommandContext(ctx, bin, "rollout", "--name", name, "--to", "v1.36.3",
			"--strategy", strategy, "--image-source", "local").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "needs an HA control plane") {
			t.Errorf("skewer rollout --strategy %s of a cluster with one control plane: %v, want a refusal naming it: %s", strategy, err, lastLines(string(out), 10))
		}
		t.Logf("skewer rollout --strategy %s: %v: %s", strategy, err, lastLines(string(out), 1))
		if after := look(); after != before {
			t.Errorf("a refused %s rollout changed the cluster:\n%s\nbefore:\n%s", strategy, after, before)
		}
	}
}

// A certification stopped with SIGTERM in the middle of the mixed window
// (what a CI job's cancel sends first), while its first newer control
// plane joins, has written results.json before it exports anything: the
// verdict it judged before the window kept, the promise it did not reach
// an error, the outcome incomplete. It then deletes its own cluster and
// exits 130. Not in make e2e - a cluster and half a window, about four
// minutes here: go test ./cmd/skewer -run TestSIGTERMInTheWindowKeepsTheVerdicts.
func TestSIGTERMInTheWindowKeepsTheVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("certifies on a kind cluster: not with -short")
	}
	ctx := needDocker(t)
	bin := skewerBinary(ctx, t)
	const name = "skewer-sigterm"
	out := filepath.Join(t.TempDir(), "results")
	before := machine(ctx, t)
	t.Cleanup(func() { _ = exec.Command(bin, "down", "--name", name+"-surge").Run() })
	cmd := exec.Command(bin, "certify", "--from", "v1.35.4", "--to", "v1.36.3", "--strategy", "surge",
		"--only", "rollout.refuses-bad-input,proxy.route.verbs", "--name", name, "--out", out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var termed bool
	var atExport *report.Results // results.json as the export began
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case !termed && strings.Contains(line, "join the new node with kubeadm ..."):
			_ = cmd.Process.Signal(syscall.SIGTERM)
			termed = true
		case termed && atExport == nil && strings.Contains(line, "export the evidence"):
			if atExport, err = report.Load(filepath.Join(out, report.ResultsFile)); err != nil {
				t.Errorf("no results.json as the export began: %v", err)
			}
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !termed || !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
		t.Fatalf("SIGTERM sent: %v; certify ended with %v, want exit %d", termed, err, exitInterrupted)
	}
	final, err := report.Load(filepath.Join(out, report.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*report.Results{atExport, final} {
		if r == nil {
			continue
		}
		got := map[promise.ID]promise.Outcome{}
		for _, p := range r.Runs[0].Promises {
			got[p.ID] = p.Outcome
		}
		if r.Outcome != promise.Incomplete || got["rollout.refuses-bad-input"] != promise.Pass || got["proxy.route.verbs"] != promise.Error {
			t.Errorf("results after SIGTERM in the window: %s (%s), refuses-bad-input %s, route.verbs %s; want incomplete, pass, error",
				r.Outcome, r.Incomplete, got["rollout.refuses-bad-input"], got["proxy.route.verbs"])
		}
	}
	if after := machine(ctx, t); !slices.Equal(after, before) {
		t.Errorf("after the interrupted certification: %v, before %v", after, before)
	}
	t.Logf("interrupted: %s", final.Incomplete)
}

// skewerBinary builds skewer for a test that runs it as a user would.
func skewerBinary(ctx context.Context, t *testing.T) string {
	t.Helper()
	root, err := source.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "skewer")
	if err := (&run.Cmd{Args: []string{"go", "build", "-o", bin, "./cmd/skewer"}, Dir: root}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	return bin
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
