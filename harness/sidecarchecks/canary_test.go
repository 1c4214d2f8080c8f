package sidecarchecks

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/sidecar"
)

// A canary whose native template did as well as its legacy one: slower
// to Ready by its sidecars' starts, none of its lines lost, its Jobs done.
func healthyCanary() CanarySeen {
	ready := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	return CanarySeen{Nodes: []string{"w1 (kubelet v1.35.4)", "cp1 (kubelet v1.36.3)"}, Pods: 4, ReadinessLooks: Looks{Tried: 120, Seen: 118}, Templates: [2]TemplateSeen{
		{Ready: ready(2100, 2300, 2600, 3900), ReadinessFailures: 2, Requests: 160, Errors: 1, Written: 2400, Lost: 37, MemoryPeak: []int64{30 << 20, 31 << 20, 29 << 20, 33 << 20},
			CPU: ready(400, 410, 380, 450), JobsUnfinished: 2},
		{Ready: ready(3000, 3300, 3500, 5200), ReadinessFailures: 3, Requests: 158, Errors: 1, Written: 2380, Lost: 0, MemoryPeak: []int64{31 << 20, 30 << 20, 30 << 20, 34 << 20},
			CPU: ready(420, 400, 390, 470), Jobs: []time.Duration{5 * time.Second, 6 * time.Second}},
	}}
}

// The canary passes what held, fails on each stop condition the native
// template breaches, naming it, and cannot be judged on too little.
func TestCanary(t *testing.T) {
	seen := healthyCanary()
	v := JudgeCanary(seen, CompareCanary(seen))
	if v.Outcome != promise.Pass {
		t.Fatalf("a healthy canary: %s %s", v.Outcome, v.Reason)
	}
	if ev := strings.Join(v.Evidence, "\n"); !strings.Contains(ev, "create to Ready, p99: legacy 3.9s, native 5.2s (stop condition <= legacy + 5s)") ||
		!strings.Contains(ev, "log lines lost on deletion: legacy 37 of 2400, native 0 of 2380") ||
		!strings.Contains(ev, "readiness lost after Ready (probe failures in all): legacy 0 (2), native 0 (3)") {
		t.Errorf("evidence:\n%s", ev)
	}
	for name, c := range map[string]struct {
		change func(n *TemplateSeen)
		names  string
	}{
		"slow to Ready":    {func(n *TemplateSeen) { n.Ready[3] = 9 * time.Second }, "create to Ready, p99"},
		"readiness lost":   {func(n *TemplateSeen) { n.ReadinessLost = 1 }, "readiness lost after Ready"},
		"a restart":        {func(n *TemplateSeen) { n.Restarts = 1 }, "container restarts"},
		"errors":           {func(n *TemplateSeen) { n.Errors = 5 }, "request errors"},
		"lines lost":       {func(n *TemplateSeen) { n.Lost = 40 }, "log lines lost"},
		"memory":           {func(n *TemplateSeen) { n.MemoryPeak[0] = 60 << 20 }, "memory peak"},
		"CPU":              {func(n *TemplateSeen) { n.CPU[0] = time.Second }, "CPU time"},
		"a Job unfinished": {func(n *TemplateSeen) { n.Jobs, n.JobsUnfinished = n.Jobs[:1], 1 }, "Job start to complete"},
		"a Job slow":       {func(n *TemplateSeen) { n.Jobs[1] = time.Minute }, "Job start to complete"},
	} {
		seen := healthyCanary()
		c.change(&seen.Templates[nativeTemplate])
		table := CompareCanary(seen)
		v := JudgeCanary(seen, table)
		if v.Outcome != promise.Fail || !strings.Contains(v.Reason, c.names) || len(table.Breaches()) != 1 {
			t.Errorf("%s: %s %q, breaches %v", name, v.Outcome, v.Reason, table.Breaches())
		}
	}
	for name, change := range map[string]func(s *CanarySeen){
		"a Pod never Ready": func(s *CanarySeen) {
			s.Templates[nativeTemplate].Ready, s.Templates[nativeTemplate].NeverReady = s.Templates[1].Ready[:3], 1
		},
		"few requests":     func(s *CanarySeen) { s.Templates[legacyTemplate].Requests = 40 },
		"no lines":         func(s *CanarySeen) { s.Templates[nativeTemplate].Written = 0 },
		"a cgroup unread":  func(s *CanarySeen) { s.Templates[legacyTemplate].MemoryPeak = s.Templates[0].MemoryPeak[:2] },
		"readiness unread": func(s *CanarySeen) { s.ReadinessLooks.Seen = 59 },
	} {
		seen := healthyCanary()
		change(&seen)
		if v := JudgeCanary(seen, CompareCanary(seen)); v.Outcome != promise.Error || !strings.Contains(v.Reason, "too little") {
			t.Errorf("%s: %s %q", name, v.Outcome, v.Reason)
		}
	}
}

// A canary failed on restarts alone is the runtime's only when, the
// starts runc could not freeze taken out of both templates, the native one
// restarted no more than the legacy one; any other breach beside it, or
// a restart left over, is unexplained and no waiver covers it.
func TestCanaryRuntimeRestarts(t *testing.T) {
	for name, c := range map[string]struct {
		change func(l, n *TemplateSeen)
		causes []string
	}{
		"a start runc failed":           {func(l, n *TemplateSeen) { n.Restarts, n.RuntimeRestarts = 1, 1 }, []string{restarts.CauseRuntimeCannotFreeze}},
		"and a crash, as legacy's":      {func(l, n *TemplateSeen) { l.Restarts, n.Restarts, n.RuntimeRestarts = 1, 2, 1 }, []string{restarts.CauseRuntimeCannotFreeze}},
		"and a crash":                   {func(l, n *TemplateSeen) { n.Restarts, n.RuntimeRestarts = 2, 1 }, []string{promise.UnknownCause}},
		"a crash against legacy's runc": {func(l, n *TemplateSeen) { l.Restarts, l.RuntimeRestarts, n.Restarts, n.RuntimeRestarts = 1, 1, 2, 1 }, []string{promise.UnknownCause}},
		"and slow to Ready": {func(l, n *TemplateSeen) { n.Restarts, n.RuntimeRestarts, n.Ready[3] = 1, 1, 9*time.Second },
			[]string{promise.UnknownCause, restarts.CauseRuntimeCannotFreeze}},
	} {
		seen := healthyCanary()
		c.change(&seen.Templates[legacyTemplate], &seen.Templates[nativeTemplate])
		v := JudgeCanary(seen, CompareCanary(seen))
		if v.Outcome != promise.Fail || !slices.Equal(v.Causes, c.causes) {
			t.Errorf("%s: %s %q, causes %v", name, v.Outcome, v.Reason, v.Causes)
		}
	}
	seen := healthyCanary()
	seen.Templates[nativeTemplate].Restarts, seen.Templates[nativeTemplate].RuntimeRestarts = 1, 1
	if v := JudgeCanary(seen, CompareCanary(seen)); !strings.Contains(v.Reason, "native 1 (1 a start the runtime failed: runtime-cannot-freeze), legacy 0") {
		t.Errorf("the row does not say which: %s", v.Reason)
	}

	// Read from the Pods' statuses: a container that ended once, its
	// ending runc's; not one that ended twice (the first ending is gone)
	// nor one another ending.
	freeze := &corev1.ContainerStateTerminated{Reason: "StartError", ExitCode: 128,
		Message: "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting cgroup config for procHooks process: unable to freeze"}
	crash := &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}
	pods := []corev1.Pod{{Status: corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "proxy", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: freeze}},
			{Name: "log-agent", RestartCount: 0, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: corev1.ContainerState{Terminated: freeze}},
			{Name: "twice", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: freeze}},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, LastTerminationState: corev1.ContainerState{Terminated: crash}}},
	}}}
	if all, runc := sidecar.Restarts(pods), runtimeRestarts(pods); all != 5 || runc != 2 {
		t.Errorf("restarts %d, of them the runtime's %d; want 5 and 2", all, runc)
	}
}

// The native template is the legacy one as the migration makes it: the
// helpers native sidecars in their order, the app left alone; a Job has
// only the log agent to move.
func TestCanaryTemplates(t *testing.T) {
	b := podBuilder{image: "fixture", ns: "ns", name: "native-w1-0", node: "w1"}
	legacy, err := canaryPod(b, false)
	if err != nil || len(legacy.Spec.InitContainers) != 0 || len(legacy.Spec.Containers) != 3 || legacy.Labels["template"] != "legacy" {
		t.Fatalf("legacy: %+v, %v", legacy.Spec, err)
	}
	native, err := canaryPod(b, true)
	if err != nil || native.Labels["template"] != "native" {
		t.Fatal(err)
	}
	if err := sidecar.Admitted(native.Spec, canaryHelpers); err != nil || len(native.Spec.Containers) != 1 || native.Spec.Containers[0].Name != "app" {
		t.Errorf("native: %v; containers %v", err, native.Spec.Containers)
	}
	job, err := canaryJob(b, true)
	if err != nil || sidecar.Admitted(job.Spec.Template.Spec, []string{"log-agent"}) != nil || job.Labels["template"] != "native" {
		t.Errorf("native Job: %+v, %v", job.Spec.Template.Spec, err)
	}
}

// A Pod's usage is read from its own cgroup directories, v1 or v2, not
// its containers'.
func TestParsePodUsage(t *testing.T) {
	const uid = "0add0573-e59f-4216-80e7-34e00d17ac7e"
	const pod = "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod0add0573_e59f_4216_80e7_34e00d17ac7e.slice"
	v1 := "/sys/fs/cgroup/memory/" + pod + "/memory.max_usage_in_bytes:34603008\n" +
		"/sys/fs/cgroup/memory/" + pod + "/cri-containerd-4f1e.scope/memory.max_usage_in_bytes:1048576\n" +
		"/sys/fs/cgroup/cpu,cpuacct/" + pod + "/cpuacct.usage:412345678\n"
	if peak, cpu, err := parsePodUsage(v1, uid, "w1"); err != nil || peak != 33<<20 || cpu != 412345678 {
		t.Errorf("cgroup v1: %d, %s, %v", peak, cpu, err)
	}
	dir := "/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/"
	v2 := dir + "memory.peak:34603008\n" + dir + "cpu.stat:usage_usec 412345\n" + dir + "cpu.stat:user_usec 300000\n"
	if peak, cpu, err := parsePodUsage(v2, uid, "w1"); err != nil || peak != 33<<20 || cpu != 412345*time.Microsecond {
		t.Errorf("cgroup v2: %d, %s, %v", peak, cpu, err)
	}
	if _, _, err := parsePodUsage("/sys/fs/cgroup/memory/"+pod+"/memory.max_usage_in_bytes:34603008\n", uid, "w1"); err == nil {
		t.Error("no CPU time read: no error")
	}
}

// A canary Pod is asked for the window, and on until it was asked its
// share of the floor - a loaded machine answers fewer in the window -
// but never past the last moment.
func TestAskWindow(t *testing.T) {
	w := askWindow{end: t0.Add(10 * time.Second), last: t0.Add(30 * time.Second), atLeast: 25}
	for _, c := range []struct {
		asked int
		at    time.Duration
		want  bool
	}{
		{0, 0, true}, {40, 5 * time.Second, true}, {40, 10 * time.Second, false}, {24, 10 * time.Second, true},
		{24, 29 * time.Second, true}, {24, 30 * time.Second, false}, {25, 11 * time.Second, false},
	} {
		if got := w.more(c.asked, t0.Add(c.at)); got != c.want {
			t.Errorf("asked %d at +%s: %t, want %t", c.asked, c.at, got, c.want)
		}
	}
}
