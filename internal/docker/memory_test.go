package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/internal/run"
)

// A container's resident memory is its cgroup's usage less its inactive
// file pages, wherever the engine's cgroup layout keeps them.
func TestResidentReadsEveryLayout(t *testing.T) {
	for _, tc := range []struct {
		name, dir, usage, stat string
		want                   int64
	}{
		{"v1, cgroupfs", "memory/docker/abc", "memory.usage_in_bytes", "cache 900\ntotal_inactive_file 300\n", 700},
		{"v1, systemd", "memory/system.slice/docker-abc.scope", "memory.usage_in_bytes", "total_inactive_file 1000\n", 0},
		{"v2, systemd", "system.slice/docker-abc.scope", "memory.current", "anon 600\ninactive_file 250\n", 750},
		{"v2, cgroupfs", "docker/abc", "memory.current", "inactive_file 0\n", 1000},
	} {
		root := t.TempDir()
		dir := filepath.Join(root, tc.dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		usage := "1000\n"
		if tc.name == "v1, systemd" {
			usage = "900\n" // the cache dropped since: never below 0
		}
		if err := os.WriteFile(filepath.Join(dir, tc.usage), []byte(usage), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memory.stat"), []byte(tc.stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := resident(root, "abc"); err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	if _, err := resident(t.TempDir(), "abcdef0123456789"); err == nil || !strings.Contains(err.Error(), "container abcdef012345: no memory cgroup") {
		t.Errorf("a container without a cgroup: %v", err)
	}
}

// WatchResident keeps the largest sample of the containers and the extra
// together, samples once more when stopped, and counts what it read.
// Real Docker, asked for containers no one has made.
func TestWatchResidentKeepsThePeak(t *testing.T) {
	ctx := context.Background()
	if err := run.Command("docker", "info").Run(ctx); err != nil {
		t.Skipf("no Docker engine answers: %v", err)
	}
	var calls atomic.Int64
	extra := func() int64 { return 100 * (calls.Add(1) % 3) } // 100, 200, 0, 100, ...
	stop := WatchResident(ctx, "label=io.skewer.test-none="+t.Name(), 10*time.Millisecond, extra)
	time.Sleep(100 * time.Millisecond)
	p := stop()
	if p.Bytes != 200 || p.Containers != 0 || p.Unread != nil || p.Samples != int(calls.Load()) || p.Samples < 3 {
		t.Errorf("peak %+v after %d samples of the extra: want 200 of it, none of the containers, every sample counted", p, calls.Load())
	}
}
