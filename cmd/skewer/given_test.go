package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// --node-image: the version of a given image is read from it; a flag that
// disagrees, and an image that is not a node image, are refused in one
// line with exit status 2; from= stands in for --from.
func TestCertifyGivenNodeImages(t *testing.T) {
	ctx := needDocker(t)
	vendor := localImage(t, map[string]string{"kind/version": "v1.36.3-acme.2\n"})
	plain := localImage(t, map[string]string{"etc/hostname": "x"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "v1.36.3", "--node-image", "to=" + vendor}, "carries v1.36.3-acme.2, but --to says v1.36.3"},
		{[]string{"--node-image", "v1.36.3=" + vendor}, "it carries v1.36.3-acme.2"},
		{[]string{"--node-image", "to=" + vendor, "--strategy", "in-place"}, "an in-place upgrade to v1.36.3-acme.2 needs its binaries and images, not the node image"},
		{[]string{"--node-image", "to=" + plain}, "is not a kind node image"},
		{[]string{"--node-image", "sideways=" + vendor}, "the key is from, to or a version"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"certify", "--from", "v1.35.4", "--dry-run", "--ignore-preflight-errors=all"}, tc.args...)
		code := Run(ctx, args, &stdout, &stderr)
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); code != exitBadInput || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Run(ctx, []string{"certify", "--from", "v1.35.4", "--node-image", "to=" + vendor, "--strategy", "surge", "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "certify v1.35.4 -> v1.36.3-acme.2") {
		t.Errorf("from= an image: exit %d, %q, %q", code, stdout.String(), stderr.String())
	}
}

// --kubernetes: a vendor's release (here, fakekube under each binary's
// name, reporting v1.36.3-acme.2) is known by what its binaries report;
// it stands in for --to, and both strategies take it. What is not a
// release is refused in one line, exit status 2.
func TestCertifyGivenRelease(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-ldflags", "-X main.v=v1.36.3-acme.2", "-o", filepath.Join(dir, "kube-apiserver"), ".")
	build.Dir = filepath.Join("..", "..", "harness", "nodeimage", "testdata", "fakekube")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	body, _ := os.ReadFile(filepath.Join(dir, "kube-apiserver"))
	for _, c := range []string{"kubeadm", "kubelet", "kubectl", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		if err := os.WriteFile(filepath.Join(dir, c), body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SKEWER_CACHE", t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := Run(ctx, []string{"certify", "--from", "v1.35.4", "--kubernetes", "to=" + dir, "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "certify v1.35.4 -> v1.36.3-acme.2") || !strings.Contains(stdout.String(), "in-place run on cluster") {
		t.Errorf("to= a release: exit %d, %q, %q", code, stdout.String(), stderr.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "v1.36.3", "--kubernetes", "to=" + dir}, "carries v1.36.3-acme.2, but --to says v1.36.3"},
		{[]string{"--kubernetes", "to=" + filepath.Join(dir, "absent")}, "no such file or directory"},
		{[]string{"--kubernetes", "to=" + filepath.Join(dir, "kubelet")}, "not a readable tar archive"},
		{[]string{"--to", "v1.37.2", "--kubernetes", "from=" + dir}, "carries v1.36.3-acme.2, but --from says v1.35.4"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"certify", "--from", "v1.35.4", "--dry-run", "--ignore-preflight-errors=all"}, tc.args...)
		code := Run(ctx, args, &stdout, &stderr)
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); code != exitBadInput || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// needDocker skips a test that needs a Docker engine where none answers,
// and is the test's context.
func needDocker(t *testing.T) context.Context {
	t.Helper()
	ctx := context.Background()
	if err := docker.Ping(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	return ctx
}

// localImage is an image of files made here for the test, removed after it.
func localImage(t *testing.T, files map[string]string) string {
	t.Helper()
	ref := fmt.Sprintf("skewer.local/test-given:%d", time.Now().UnixNano())
	if err := docker.ImportFiles(context.Background(), ref, files); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Command("docker", "image", "rm", "-f", ref).Run(context.Background()) })
	return ref
}
