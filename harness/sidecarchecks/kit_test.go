package sidecarchecks

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// The formula of KEP-753, on the Pods the resources check makes, and on a
// plain init container larger than everything else.
func TestEffectiveRequests(t *testing.T) {
	b := podBuilder{image: "img", ns: "ns", name: "p"}
	proxy := withRequests(b.container("proxy", "proxy"), "100m", "32Mi")
	setup := withRequests(b.container("setup", "app"), "500m", "64Mi")
	app := withRequests(b.container("app", "app"), "200m", "128Mi")
	huge := withRequests(b.container("huge", "app"), "2", "1Gi")
	for _, c := range []struct {
		name     string
		pod      *corev1.Pod
		cpu, mem string
	}{
		{"native", b.pod([]corev1.Container{native(proxy), setup}, []corev1.Container{app}), "600m", "160Mi"},
		{"legacy", b.pod([]corev1.Container{setup}, []corev1.Container{app, proxy}), "500m", "160Mi"},
		// A plain init container before the sidecar does not run beside it.
		{"init first", b.pod([]corev1.Container{huge, native(proxy)}, []corev1.Container{app}), "2", "1Gi"},
		{"sidecar first", b.pod([]corev1.Container{native(proxy), huge}, []corev1.Container{app}), "2100m", "1056Mi"},
	} {
		cpu, mem := effective(c.pod, corev1.ResourceCPU), effective(c.pod, corev1.ResourceMemory)
		if cpu.String() != c.cpu || mem.String() != c.mem {
			t.Errorf("%s: cpu %s, memory %s; want %s, %s", c.name, cpu.String(), mem.String(), c.cpu, c.mem)
		}
	}
}

// The QoS class by the documented rules: sidecars count like any
// container; a request with no limit, or a limit above it, is Burstable.
func TestQOSClass(t *testing.T) {
	b := podBuilder{image: "img", ns: "ns", name: "p"}
	nat, leg := sizedCases[0], sizedCases[1]
	if got := qosClass((&Sidecars{image: "img"}).sizedPod("ns", "", nat, true)); got != corev1.PodQOSGuaranteed {
		t.Errorf("the limits check's native Pod: %s, want Guaranteed", got)
	}
	if got := qosClass((&Sidecars{image: "img"}).sizedPod("ns", "", leg, false)); got != corev1.PodQOSBurstable {
		t.Errorf("the requests-only Pod: %s, want Burstable", got)
	}
	if got := qosClass(b.pod([]corev1.Container{native(b.container("proxy", "proxy"))}, []corev1.Container{b.container("app", "app")})); got != corev1.PodQOSBestEffort {
		t.Errorf("a Pod with no resources: %s, want BestEffort", got)
	}
	pod := (&Sidecars{image: "img"}).sizedPod("ns", "", nat, true)
	pod.Spec.InitContainers[0].Resources.Limits = nil // the sidecar alone unbounded
	if got := qosClass(pod); got != corev1.PodQOSBurstable {
		t.Errorf("a Guaranteed Pod but for its sidecar's limits: %s, want Burstable", got)
	}
	guaranteed := (&Sidecars{image: "img"}).sizedPod("ns", "", nat, true)
	lim, mem := effectiveLimit(guaranteed, corev1.ResourceCPU), effectiveLimit(guaranteed, corev1.ResourceMemory)
	if lim.String() != nat.cpu || mem.String() != nat.memory {
		t.Errorf("effective limits %s, %s; want %s, %s", lim.String(), mem.String(), nat.cpu, nat.memory)
	}
}

// A cgroup's limits as read from its files: v1 and v2, limited or not.
func TestCgroupValues(t *testing.T) {
	for _, c := range []struct{ quota, period, want string }{{"60000", "100000", "600m"}, {"-1", "100000", ""}, {"max", "100000", ""}, {"150000", "100000", "1500m"}} {
		got := cpuQuota(c.quota, c.period)
		if (got == nil) != (c.want == "") || (got != nil && got.String() != c.want) {
			t.Errorf("cpuQuota(%s, %s) = %v, want %q", c.quota, c.period, got, c.want)
		}
	}
	if got := bytesLimit("167772160", "max"); got == nil || got.String() != "160Mi" {
		t.Errorf("bytesLimit(160Mi) = %v", got)
	}
	if got := bytesLimit("9223372036854771712", "9223372036854771712"); got != nil {
		t.Errorf("cgroup v1's unlimited read as %v", got)
	}
	if got := bytesLimit("max", "max"); got != nil {
		t.Errorf("cgroup v2's unlimited read as %v", got)
	}
}

// perPod gives each container the Pod's name and mounts its events there.
func TestPerPod(t *testing.T) {
	b := podBuilder{image: "img", ns: "ns", name: "web"}
	pod := perPod(b.pod([]corev1.Container{native(b.container("proxy", "proxy"))}, []corev1.Container{b.container("app", "app")}))
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if len(c.Env) != 1 || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("%s: env %+v", c.Name, c.Env)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "events" && m.SubPathExpr != "$(POD_NAME)" {
				t.Errorf("%s: events mounted with %q", c.Name, m.SubPathExpr)
			}
		}
	}
}

// Run at once, the kubelets' checks overlap; the verdict reads as onEach's
// (evidence in the kubelets' order), and a failure names every kubelet
// that failed, not only the first.
func TestOnEachAtOnce(t *testing.T) {
	s := &Sidecars{Kubelets: testKubelets}
	var running, overlapped atomic.Int32
	both := make(chan struct{})
	v := s.onEachAtOnce(t.Context(), "sidecar.resources.limits-qos", func(ctx context.Context, k Kubelet) ([]string, error) {
		if running.Add(1) == int32(len(testKubelets)) {
			close(both)
		}
		select {
		case <-both:
			overlapped.Add(1)
		case <-time.After(5 * time.Second):
		}
		return []string{"held"}, nil
	})
	if v.Outcome != promise.Pass || overlapped.Load() != int32(len(testKubelets)) {
		t.Fatalf("%v (%s), %d of %d checks overlapped", v.Outcome, v.Reason, overlapped.Load(), len(testKubelets))
	}
	if want := []string{"w1 (kubelet v1.35.4): held", "cp1 (kubelet v1.36.3): held"}; !slices.Equal(v.Evidence, want) {
		t.Errorf("evidence %q, want %q", v.Evidence, want)
	}
	v = s.onEachAtOnce(t.Context(), "sidecar.resources.limits-qos", func(ctx context.Context, k Kubelet) ([]string, error) {
		return nil, errors.New("QoS class Burstable, computed Guaranteed")
	})
	if v.Outcome != promise.Fail || !strings.Contains(v.Reason, "w1 (kubelet") || !strings.Contains(v.Reason, "cp1 (kubelet") {
		t.Errorf("%v: %s, want a failure naming both kubelets", v.Outcome, v.Reason)
	}
}

// What podCgroup's one command prints on a cgroup v1 node (a Burstable
// Pod of the worker, its container's directory below it) and on a v2 one.
func TestParsePodCgroup(t *testing.T) {
	const uid = "0add0573-e59f-4216-80e7-34e00d17ac7e"
	const pod = "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod0add0573_e59f_4216_80e7_34e00d17ac7e.slice"
	v1 := "/sys/fs/cgroup/memory/" + pod + "/memory.limit_in_bytes:167772160\n" +
		"/sys/fs/cgroup/memory/" + pod + "/cri-containerd-4f1e.scope/memory.limit_in_bytes:104857600\n" +
		"/sys/fs/cgroup/cpu/" + pod + "/cpu.cfs_period_us:100000\n" +
		"/sys/fs/cgroup/cpu/" + pod + "/cpu.cfs_quota_us:60000\n" +
		"/sys/fs/cgroup/cpu/" + pod + "/cri-containerd-4f1e.scope/cpu.cfs_quota_us:10000\n"
	cg, err := parsePodCgroup(v1, uid, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if cg.qos != corev1.PodQOSBurstable || cg.cpu.String() != "600m" || cg.memory.String() != "160Mi" || cg.cpuText != "60000 per 100000 us" ||
		cg.cpuPath != "/sys/fs/cgroup/cpu/"+pod {
		t.Errorf("cgroup v1: %+v", cg)
	}

	v2 := "/sys/fs/cgroup/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cpu.max:max 100000\n" +
		"/sys/fs/cgroup/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/memory.max:max\n"
	if cg, err := parsePodCgroup(v2, uid, "worker"); err != nil || cg.qos != corev1.PodQOSGuaranteed || cg.cpu != nil || cg.memory != nil || cg.cpuText != "max 100000" {
		t.Errorf("cgroup v2: %+v, %v", cg, err)
	}

	for what, out := range map[string]string{
		"nothing found":    "",
		"containers only":  "/sys/fs/cgroup/cpu/" + pod + "/cri-containerd-4f1e.scope/cpu.cfs_quota_us:10000\n",
		"another Pod":      strings.ReplaceAll(v1, "0add0573", "1bbd0573"),
		"no memory cgroup": "/sys/fs/cgroup/cpu/" + pod + "/cpu.cfs_quota_us:60000\n",
	} {
		if _, err := parsePodCgroup(out, uid, "worker"); err == nil || !strings.Contains(err.Error(), "no cgroup with a CPU quota") {
			t.Errorf("%s: error %v", what, err)
		}
	}
}
