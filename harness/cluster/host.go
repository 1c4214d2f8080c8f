package cluster

import (
	"context"
	"syscall"

	"github.com/skewer-k8s/skewer/internal/run"
)

// CgroupV1 says whether the host mounts cgroup v1 (not the unified v2
// hierarchy) at /sys/fs/cgroup.
func CgroupV1() bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return false
	}
	const cgroup2Magic = 0x63677270
	return st.Type != cgroup2Magic
}

// ProbeHost finds what the cluster must adapt to, by trying rather than
// assuming: the cgroup mode of the host, and whether a privileged container
// from image may lower its oom_score_adj (runc in a node must, unless
// containerd is told to restrict it).
func ProbeHost(ctx context.Context, image string) (Host, error) {
	h := Host{CgroupV1: CgroupV1()}
	err := run.Command("docker", "run", "--rm", "--privileged", "--network", "none", "--entrypoint", "sh",
		image, "-c", "echo -999 > /proc/self/oom_score_adj").Run(ctx)
	if ctx.Err() != nil {
		return h, ctx.Err()
	}
	h.RestrictOOMScoreAdj = err != nil
	return h, nil
}
