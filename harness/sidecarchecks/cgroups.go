package sidecarchecks

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
// v2's cpu.max and memory.max.
func podCgroup(ctx context.Context, node cluster.Node, uid string) (cgroupLimits, error) {
	var cg cgroupLimits
	out, err := node.Run(ctx, "find", "/sys/fs/cgroup", "-maxdepth", "10", "-type", "d",
		"(", "-name", "*pod"+uid+"*", "-o", "-name", "*pod"+strings.ReplaceAll(uid, "-", "_")+"*", ")")
	if err != nil {
		return cg, fmt.Errorf("failed to find the cgroup of Pod %s on %s: %w", uid, node.Name, err)
	}
	for _, dir := range strings.Fields(out) {
		if v, err := node.ReadFile(ctx, dir+"/cpu.max"); err == nil { // cgroup v2: one directory
			m, err := node.ReadFile(ctx, dir+"/memory.max")
			if err != nil {
				return cg, err
			}
			cg = v2Limits(dir, string(v), string(m))
			break
		}
		if q, err := node.ReadFile(ctx, dir+"/cpu.cfs_quota_us"); err == nil {
			p, err := node.ReadFile(ctx, dir+"/cpu.cfs_period_us")
			if err != nil {
				return cg, err
			}
			cg.cpuPath, cg.cpuText = dir, strings.TrimSpace(string(q))+" per "+strings.TrimSpace(string(p))+" us"
			cg.cpu = cpuQuota(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
		}
		if m, err := node.ReadFile(ctx, dir+"/memory.limit_in_bytes"); err == nil {
			cg.memPath, cg.memText = dir, strings.TrimSpace(string(m))
			// cgroup v1 writes "unlimited" as the largest page-aligned int64.
			cg.memory = bytesLimit(cg.memText, "9223372036854771712")
		}
	}
	if cg.cpuPath == "" || cg.memPath == "" {
		return cg, fmt.Errorf("no cgroup with a CPU quota and a memory limit found for Pod %s on %s among %q", uid, node.Name, out)
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
