package nodeimage

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Two runs building the same thing at once (two certifications, a suite
// beside make e2e) must not remove each other's output: one build's
// start once deleted the other's half-written binaries, and that build
// failed 31 minutes in.
func TestCachedDirBuildsDoNotShareATemporaryDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kubernetes-v1.36.3")
	inA := make(chan struct{})
	goOn := make(chan struct{})
	errA := make(chan error, 1)
	go func() {
		_, err := cachedDir(dir, func(out string) error {
			if err := os.MkdirAll(out, 0o755); err != nil { // as go build -o out/ does
				return err
			}
			if err := os.WriteFile(filepath.Join(out, "kube-apiserver"), []byte("a"), 0o644); err != nil {
				return err
			}
			close(inA)
			<-goOn
			_, err := os.Stat(filepath.Join(out, "kube-apiserver"))
			return err // gone if the other build took our directory
		})
		errA <- err
	}()
	<-inA
	cached, err := cachedDir(dir, func(out string) error {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, "kube-apiserver"), []byte("b"), 0o644)
	})
	close(goOn)
	if err != nil || cached {
		t.Fatalf("the second build: cached %v, %v", cached, err)
	}
	if err := <-errA; err != nil {
		t.Fatalf("the first build, with the second done beside it: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "kube-apiserver"))
	if err != nil || string(got) != "b" {
		t.Errorf("the cache holds %q (%v), want the first complete build's", got, err)
	}
	if left, _ := filepath.Glob(dir + ".tmp*"); len(left) > 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}

// What a killed build left is removed by the next build; what a running
// build writes is not.
func TestCachedDirSweepsOnlyDeadBuilds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kubernetes-v1.36.3")
	dead, running := dir+".tmp-killed", dir+".tmp-running"
	for _, d := range []string{dead, running, dir + ".tmp"} {
		if err := os.MkdirAll(filepath.Join(d, "half"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := lockDir(running)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := cachedDir(dir, func(out string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(dir + ".tmp*")
	if len(left) != 1 || left[0] != running {
		t.Errorf("left %v, want only the running build's %s", left, running)
	}
}

// killedChild names the cache entry a child of
// TestCachedDirAfterABuildKilledMidStep builds into.
const killedChild = "SKEWER_TEST_KILLED_BUILD"

// A build killed with SIGKILL halfway through writing its output - a real
// process, killed as a CI runner's cancel kills it, no handler run -
// leaves nothing the cache takes as built, and the next build of the same
// entry removes what it left and installs its own whole.
func TestCachedDirAfterABuildKilledMidStep(t *testing.T) {
	if dir := os.Getenv(killedChild); dir != "" {
		_, err := cachedDir(dir, func(out string) error {
			if err := os.WriteFile(filepath.Join(out, "kube-apiserver"), []byte("half of it"), 0o755); err != nil {
				return err
			}
			fmt.Println("writing")
			select {} // until killed
		})
		t.Fatalf("the build was not killed: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "kubernetes-v1.36.3")
	child := exec.Command(os.Args[0], "-test.run=^TestCachedDirAfterABuildKilledMidStep$")
	child.Env = append(os.Environ(), killedChild+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "writing" {
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a killed build left %s in the cache (%v)", dir, err)
	}
	if left, _ := filepath.Glob(dir + ".tmp*"); len(left) != 1 {
		t.Fatalf("the killed build's own temporary directory: %v, want one", left)
	}
	cached, err := cachedDir(dir, func(out string) error {
		return os.WriteFile(filepath.Join(out, "kube-apiserver"), []byte("whole"), 0o755)
	})
	if err != nil || cached {
		t.Fatalf("the next build: cached %v, %v", cached, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "kube-apiserver")); err != nil || string(got) != "whole" {
		t.Errorf("the entry after the next build: %q, %v", got, err)
	}
	if left, _ := filepath.Glob(dir + ".tmp*"); len(left) > 0 {
		t.Errorf("left after the next build: %v", left)
	}
}
