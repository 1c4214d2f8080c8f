package sidecarchecks

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// cgroupLimits is what a node's cgroup tree holds for one Pod: the QoS
// class by where the kubelet put it, its CPU quota and memory limit
// (nil: unlimited), as read and as quantities.
type cgroupLimits struct {
	qos              corev1.PodQOSClass
	cpuPath, memPath string
	cpuText, memText string
	cpu, memory      *resource.Quantity
}

// podCgroup finds the Pod's cgroup on node by its UID (the systemd
// driver writes it with underscores) and reads its limits: cgroup v1's
// cpu.cfs_quota_us/cpu.cfs_period_us and memory.limit_in_bytes, or cgroup
// v2's cpu.max and memory.max. One command finds and reads them all: a
// docker exec costs the busy machine more than the files it reads, and
// cgroup v1 has a directory per controller (39 of them per Pod, read one
// by one, were a third of the sidecar phase's execs).
func podCgroup(ctx context.Context, node cluster.Node, uid string) (cgroupLimits, error) {
	out, err := node.Run(ctx, podCgroupFind(cgroupRoot, uid, "cpu.max", "memory.max", "cpu.cfs_quota_us", "cpu.cfs_period_us", "memory.limit_in_bytes")...)
	if err != nil {
		return cgroupLimits{}, fmt.Errorf("failed to read the cgroup of Pod %s on %s: %w", uid, node.Name, err)
	}
	return parsePodCgroup(out, uid, node.Name)
}

// cgroupRoot is where a node mounts its cgroups.
const cgroupRoot = "/sys/fs/cgroup"

// podCgroupFind is the command that finds the files named in the Pod's
// own cgroup directories (the cgroupfs driver's pod<uid>, the systemd
// driver's ...-pod<uid with underscores>.slice; not its containers' below
// them) and prints them, "file:line" each line. It reads nothing else:
// the containers of other Pods come and go on a busy node, so find is told
// to pass over a directory that vanished while it walked, and grep is only
// given files of a Pod that runs.
func podCgroupFind(root, uid string, names ...string) []string {
	argv := []string{"find", root, "-ignore_readdir_race", "-maxdepth", "11", "-type", "f", "("}
	for i, n := range names {
		if i > 0 {
			argv = append(argv, "-o")
		}
		argv = append(argv, "-path", "*pod"+uid+"/"+n, "-o", "-path", "*pod"+strings.ReplaceAll(uid, "-", "_")+".slice/"+n)
	}
	return append(argv, ")", "-exec", "grep", "-H", ".", "{}", "+")
}

// podDirs sorts grep -H's "file:line" lines of the files of the Pod's own
// directories (not its containers' below them) by directory, in the order
// found; a file of several lines keeps them all.
func podDirs(out, uid string) (map[string]map[string]string, []string) {
	dirs := map[string]map[string]string{}
	var order []string
	for _, line := range strings.Split(out, "\n") {
		file, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		dir := path.Dir(file)
		if base := path.Base(dir); !strings.Contains(base, "pod"+uid) && !strings.Contains(base, "pod"+strings.ReplaceAll(uid, "-", "_")) {
			continue
		}
		if dirs[dir] == nil {
			dirs[dir] = map[string]string{}
			order = append(order, dir)
		}
		f := path.Base(file)
		dirs[dir][f] = strings.TrimSpace(dirs[dir][f] + "\n" + strings.TrimSpace(value))
	}
	return dirs, order
}

// parsePodCgroup reads grep -H's "file:value" lines of the files of the
// Pod's own directories (not its containers' below them).
func parsePodCgroup(out, uid, node string) (cgroupLimits, error) {
	var cg cgroupLimits
	dirs, order := podDirs(out, uid)
	for _, dir := range order {
		f := dirs[dir]
		if v, ok := f["cpu.max"]; ok { // cgroup v2: one directory
			cg = v2Limits(dir, v, f["memory.max"])
			break
		}
		if q, ok := f["cpu.cfs_quota_us"]; ok {
			p := f["cpu.cfs_period_us"]
			cg.cpuPath, cg.cpuText = dir, q+" per "+p+" us"
			cg.cpu = cpuQuota(q, p)
		}
		if m, ok := f["memory.limit_in_bytes"]; ok {
			cg.memPath, cg.memText = dir, m
			// cgroup v1 writes "unlimited" as the largest page-aligned int64.
			cg.memory = bytesLimit(cg.memText, "9223372036854771712")
		}
	}
	if cg.cpuPath == "" || cg.memPath == "" {
		return cg, fmt.Errorf("no cgroup with a CPU quota and a memory limit found for Pod %s on %s among %q", uid, node, order)
	}
	cg.qos = qosOfCgroup(cg.cpuPath)
	return cg, nil
}

// v2Limits is a cgroup v2 Pod directory's limits, from its cpu.max and
// memory.max.
func v2Limits(dir, cpuMax, memoryMax string) cgroupLimits {
	cg := cgroupLimits{cpuPath: dir, memPath: dir, cpuText: strings.TrimSpace(cpuMax), memText: strings.TrimSpace(memoryMax)}
	quota, period, _ := strings.Cut(cg.cpuText, " ")
	cg.cpu = cpuQuota(quota, period)
	cg.memory = bytesLimit(cg.memText, "max")
	return cg
}

// qosOfCgroup is the QoS class the kubelet gave a Pod, by where it put
// the Pod's cgroup.
func qosOfCgroup(path string) corev1.PodQOSClass {
	switch path := strings.ToLower(path); {
	case strings.Contains(path, "burstable"):
		return corev1.PodQOSBurstable
	case strings.Contains(path, "besteffort"):
		return corev1.PodQOSBestEffort
	}
	return corev1.PodQOSGuaranteed // Guaranteed Pods sit right under kubepods
}

// cpuQuota is a CFS quota as CPU: quota/period cores, nil when unlimited.
func cpuQuota(quota, period string) *resource.Quantity {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return nil
	}
	return resource.NewMilliQuantity(q*1000/p, resource.DecimalSI)
}

// bytesLimit is a memory limit as a quantity, nil when it is unlimited.
func bytesLimit(text, unlimited string) *resource.Quantity {
	b, err := strconv.ParseInt(text, 10, 64)
	if text == unlimited || err != nil {
		return nil
	}
	return resource.NewQuantity(b, resource.BinarySI)
}

// podUsage is the most memory the Pod's cgroup on node has held and the
// CPU time it has used: cgroup v1's memory.max_usage_in_bytes and
// cpuacct.usage, or v2's memory.peak and cpu.stat's usage_usec.
func podUsage(ctx context.Context, node cluster.Node, uid string) (int64, time.Duration, error) {
	out, err := node.Run(ctx, podCgroupFind(cgroupRoot, uid, "memory.max_usage_in_bytes", "cpuacct.usage", "memory.peak", "cpu.stat")...)
	if err != nil {
		return 0, 0, fmt.Errorf("failed to read the cgroup of Pod %s on %s: %w", uid, node.Name, err)
	}
	return parsePodUsage(out, uid, node.Name)
}

// parsePodUsage reads podUsage's find.
func parsePodUsage(out, uid, node string) (int64, time.Duration, error) {
	dirs, order := podDirs(out, uid)
	peak, cpu := int64(-1), time.Duration(-1)
	for _, dir := range order {
		f := dirs[dir]
		for _, name := range []string{"memory.max_usage_in_bytes", "memory.peak"} {
			if v, err := strconv.ParseInt(f[name], 10, 64); err == nil {
				peak = v
			}
		}
		if v, err := strconv.ParseInt(f["cpuacct.usage"], 10, 64); err == nil {
			cpu = time.Duration(v)
		}
		for _, line := range strings.Split(f["cpu.stat"], "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				if us, err := strconv.ParseInt(v, 10, 64); err == nil {
					cpu = time.Duration(us) * time.Microsecond
				}
			}
		}
	}
	if peak < 0 || cpu < 0 {
		return 0, 0, fmt.Errorf("no memory peak and CPU time found in the cgroup of Pod %s on %s among %q", uid, node, order)
	}
	return peak, cpu, nil
}
