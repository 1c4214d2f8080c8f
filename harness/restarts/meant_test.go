package restarts

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// What a span names is meant within it; the same outside it, or anything
// it does not name, fails the promise.
func TestMeantAndCheck(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	spans := []Span{
		{Name: "roll every control plane", Start: at.Add(-time.Minute).Add(700 * time.Millisecond), End: at.Add(time.Minute), Restarts: []string{ControlPlane}},
		{Name: "kill CoreDNS", Start: at.Add(3 * time.Minute), End: at.Add(4 * time.Minute), Restarts: []string{"coredns"}},
		{Name: "a sidecar killed for memory", Start: at.Add(10 * time.Minute), End: at.Add(11 * time.Minute), Restarts: []string{"hog"}},
	}
	in := func(e Event, d time.Duration) Event { e.Time = at.Add(d); return e }
	container := func(pod, name string) Event {
		return Event{Kind: Container, Node: "cp1", Namespace: "kube-system", Pod: pod, Container: name,
			Count: 1, ExitCode: 1, Reason: "Error", Logs: []string{"leaderelection lost"}}
	}
	// Seen in an in-place run: the kubelet restarted by the rollout
	// while it started kube-proxy's new container.
	startError := func(e Event) Event { e.ExitCode, e.Reason, e.Logs = 128, "StartError", nil; return e }
	kubelet := Event{Kind: Kubelet, Node: "cp1", ControlPlaneNode: true, Container: Kubelet, Reason: "stopped"}
	meant := Meant(spans)
	for _, tc := range []struct {
		e    Event
		want bool
	}{
		{in(container("kube-controller-manager-cp1", "kube-controller-manager"), 0), true},
		{in(container("etcd-cp1", "etcd"), 0), true},
		// The kubelet's seconds: the span began 0.7 s into the second.
		{in(container("etcd-cp1", "etcd"), -time.Minute), true},
		{in(container("etcd-cp1", "etcd"), -time.Minute-time.Second), false},
		{in(container("kube-controller-manager-cp1", "kube-controller-manager"), 2*time.Minute), false},
		{in(container("coredns-7d8f", "coredns"), 0), false},
		{in(container("coredns-7d8f", "coredns"), 3*time.Minute+time.Second), true},
		{in(container("kube-scheduler-lookalike", "kube-controller-manager"), 0), false},
		{in(startError(container("kube-proxy-x99rf", "kube-proxy")), 0), true},
		{in(startError(container("kube-proxy-x99rf", "kube-proxy")), 2*time.Minute), false},
		{in(kubelet, 0), true},
		{in(kubelet, 2*time.Minute), false},
		{in(Event{Kind: NotReady, Node: "cp1", ControlPlaneNode: true}, 30*time.Second), true},
		// A control-plane step does not act on a worker.
		{in(Event{Kind: NotReady, Node: "w1"}, 30*time.Second), false},
		{in(Event{Kind: Kubelet, Node: "w1", Container: Kubelet, Reason: "stopped"}, 0), false},
		{in(Event{Kind: Containerd, Node: "cp1", Container: Containerd}, 0), false},
		// Made by the step that declared it, crashing after it: meant.
		{in(Event{Kind: Container, Namespace: "kube-system", Pod: "coredns-x", Container: "coredns", PodCreated: at.Add(3*time.Minute + 30*time.Second)}, 5*time.Minute), true},
		{in(Event{Kind: Container, Namespace: "kube-system", Pod: "coredns-x", Container: "coredns", PodCreated: at.Add(5 * time.Minute)}, 5*time.Minute), false},
		// A static Pod made during a rollout is judged by when it restarts.
		{in(Event{Kind: Container, Namespace: "kube-system", Pod: "etcd-cp1", Container: "etcd", PodCreated: at}, 2*time.Minute), false},
		{in(Event{Kind: Evicted, Node: "w1", Namespace: "default", Pod: "web"}, 0), false},
		{in(Event{Kind: OOMKilled, Node: "w1", Namespace: "default", Pod: "job-x", Container: "main"}, 0), false},
		// A container a step names is meant when the kernel kills it too.
		{in(Event{Kind: OOMKilled, Node: "w1", Namespace: "sidecar-oom", Pod: "oom", Container: "hog"}, 10*time.Minute+30*time.Second), true},
		{in(Event{Kind: OOMKilled, Node: "w1", Namespace: "sidecar-oom", Pod: "oom", Container: "app"}, 10*time.Minute+30*time.Second), false},
	} {
		if got := meant(tc.e); got != tc.want {
			t.Errorf("%s: meant %v, want %v", tc.e, got, tc.want)
		}
	}
	if !covers(Workloads, Event{Kind: Container, Namespace: "sidecar-readiness", Container: "helper"}) ||
		covers(Workloads, Event{Kind: Container, Namespace: "kube-system", Container: "coredns"}) {
		t.Error("workloads are containers outside kube-system")
	}
	if v := Check(nil, meant); v.Outcome != promise.Pass {
		t.Errorf("no event: %+v", v)
	}
	v := Check([]Event{in(container("etcd-cp1", "etcd"), 0), in(container("coredns-7d8f", "coredns"), 2*time.Minute)}, meant)
	if v.Outcome != promise.Fail || !strings.Contains(v.Reason, "1 restart(s), crash(es) or eviction(s) no step meant, first: 2026-12-01T14:02:00Z kube-system/coredns-7d8f container coredns on cp1") ||
		!strings.Contains(v.Evidence[0], "last lines: leaderelection lost") || !strings.HasPrefix(v.Evidence[1], "meant: ") {
		t.Errorf("one meant, one not: %+v", v)
	}
	if err := v.Validate(); err != nil {
		t.Error(err)
	}
	// A node leaving Ready is cluster.nodes-stay-ready's, not this one's.
	if v := Check([]Event{in(Event{Kind: NotReady, Node: "w1"}, 0)}, meant); v.Outcome != promise.Pass {
		t.Errorf("a worker not Ready: %+v", v)
	}
}

// The journal's lines arrive in pieces; each whole line is read once.
func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{line: func(b []byte) { got = append(got, string(b)) }}
	for _, p := range []string{`{"a":`, `1}` + "\n" + `{"b"`, `:2}` + "\n", "tail"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != `{"a":1},{"b":2}` {
		t.Errorf("lines: %q", got)
	}
}

// An eviction is one event: the containers it killed, reported
// terminated with their restart counts raised in the same update, are
// not restarts of their own, and the kubelet's Evicted event for the same
// Pod adds nothing. A Pod whose containers exit 0 on SIGTERM keeps no
// trace of its eviction in its status: the kubelet's event alone names
// it. A restart outside an eviction is one event; an Evicted event from
// before the monitor, or not the kubelet's, none.
func TestEvictionIsOneEvent(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel() // no log reads
	start := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	m := &Monitor{journals: done, controlPlanes: map[string]bool{}, evicted: map[types.UID]bool{}, started: start}
	const msg = `Usage of EmptyDir volume "fill" exceeds the limit "2Mi".`
	pod := func(uid types.UID, reason string, count int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "filler-" + string(uid), Namespace: "ns", UID: uid},
			Spec: corev1.PodSpec{NodeName: "w1"},
			Status: corev1.PodStatus{Reason: reason, Message: msg,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "hog", RestartCount: count,
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown"}}}}}}
	}
	event := func(uid types.UID, at time.Time, component string) *corev1.Event {
		return &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "filler-" + string(uid), UID: uid},
			Reason: "Evicted", Message: msg, Source: corev1.EventSource{Component: component, Host: "w1"}, LastTimestamp: metav1.NewTime(at)}
	}
	m.comparePods(pod("a", "", 0), pod("a", "Evicted", 1))
	m.comparePods(pod("a", "Evicted", 1), pod("a", "Evicted", 1))
	m.evictionEvent(event("a", start.Add(time.Minute), "kubelet"))
	m.evictionEvent(event("b", start.Add(time.Minute), "kubelet"))     // its status says Succeeded
	m.evictionEvent(event("c", start.Add(-time.Minute), "kubelet"))    // before the monitor
	m.evictionEvent(event("d", start.Add(time.Minute), "descheduler")) // not the kubelet
	var pods []string
	for _, e := range m.Events() {
		if e.Kind != Evicted || e.Node != "w1" || !strings.Contains(e.String(), "EmptyDir") {
			t.Errorf("not an eviction on w1: %s", e)
		}
		pods = append(pods, e.Pod)
	}
	if slices.Sort(pods); strings.Join(pods, ",") != "filler-a,filler-b" {
		t.Fatalf("evicted: %v", pods)
	}
	m.comparePods(pod("e", "", 0), pod("e", "", 1))
	if got := m.Events(); len(got) != 3 || !slices.ContainsFunc(got, func(e Event) bool { return e.Kind == Container && e.ExitCode == 137 }) {
		t.Errorf("a restart: %+v", got)
	}
}

// A restart whose status reached the API without the last state (sent
// while the node's apiserver was down) is timed by the new instance's
// start, not by when the monitor saw it, and says so: session 26's
// scheduler, started again at 17:02:15 within the phase that restarted
// its apiserver, was seen at 17:02:45, after it, and failed the run.
func TestARestartWithoutLastStateIsTimedByItsNewStart(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel() // no log reads
	m := &Monitor{journals: done, controlPlanes: map[string]bool{}, evicted: map[types.UID]bool{}}
	started := time.Date(2026, 12, 5, 17, 2, 15, 0, time.UTC)
	pod := func(st corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler-cp", Namespace: "kube-system", UID: "u"},
			Spec: corev1.PodSpec{NodeName: "cp"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}
	}
	m.comparePods(pod(corev1.ContainerStatus{Name: "kube-scheduler"}),
		pod(corev1.ContainerStatus{Name: "kube-scheduler", RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}))
	m.comparePods(pod(corev1.ContainerStatus{Name: "kube-scheduler", RestartCount: 1}),
		pod(corev1.ContainerStatus{Name: "kube-scheduler", RestartCount: 2,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}))
	got := m.Events()
	if len(got) != 2 {
		t.Fatalf("events: %+v", got)
	}
	if !got[0].Time.Equal(started) || !strings.Contains(got[0].String(), "no last state; timed by the new instance's start") {
		t.Errorf("timed at %s: %s", got[0].Time, got[0])
	}
	if time.Since(got[1].Time) > time.Minute || !strings.Contains(got[1].String(), "timed when seen") {
		t.Errorf("no start to time it by: %s", got[1])
	}
	phase := []Span{{Name: "the proxy switched off on cp", Start: started.Add(-13 * time.Second), End: started.Add(28 * time.Second),
		Restarts: []string{ControlPlane}, Nodes: []string{"cp"}}}
	if !Meant(phase)(got[0]) {
		t.Errorf("a restart within the phase that restarted the node's apiserver is not meant: %s", got[0])
	}
}

// The kubelet's file of a container's log, read when the API cannot
// give it, yields the messages Cause reads.
func TestCRILogLines(t *testing.T) {
	raw := "2026-12-05T17:02:12.5Z stderr F E1205 17:02:12.5 1 server.go:319] \"Leaderelection lost\"\n" +
		"2026-12-05T17:02:12.6Z stderr P partial line\n"
	got := criLogLines(raw)
	if len(got) != 2 || got[0] != `E1205 17:02:12.5 1 server.go:319] "Leaderelection lost"` || got[1] != "partial line" {
		t.Errorf("lines: %q", got)
	}
	e := Event{Kind: Container, Namespace: "kube-system", Container: "kube-scheduler", ExitCode: 1, Logs: got}
	if e.Cause() != CauseLostLeaderLease {
		t.Errorf("cause of %q: %q", got, e.Cause())
	}
}

// A container that never ran (StartError) has no lines of its own: the
// runtime's error, the terminated state's message, is its evidence
// (session 26: a fixture's StartError on the old worker, whose node the
// run then removed, said nothing more than its reason).
func TestAStartErrorSaysTheRuntimesError(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel() // no log reads
	m := &Monitor{journals: done, controlPlanes: map[string]bool{}, evicted: map[types.UID]bool{}}
	const msg = "failed to create containerd task: failed to create shim task: OCI runtime create failed: unable to freeze"
	pod := func(count int32, last *corev1.ContainerStateTerminated) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "flush-loss", Namespace: "skewer-sidecar-1", UID: "u"},
			Spec: corev1.PodSpec{NodeName: "w"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "log-agent", RestartCount: count,
				LastTerminationState: corev1.ContainerState{Terminated: last}}}}}
	}
	m.comparePods(pod(0, nil), pod(1, &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: msg + "\n"}))
	got := m.Events()
	if len(got) != 1 || !strings.Contains(got[0].String(), "(count 1, exit code 128 StartError: "+msg+")") {
		t.Errorf("events: %v", got)
	}
}

// A node's journal the monitor could not follow makes a pass an error:
// a restart there would not have been seen. A failure stays a failure.
func TestWithGaps(t *testing.T) {
	gap := []string{"the journal of w1: exit status 1"}
	pass := promise.Verdict{ID: "cluster.no-unexpected-restarts", Outcome: promise.Pass, Evidence: []string{"0 event(s) seen"}}
	if v := withGaps(pass, nil); v.Outcome != promise.Pass {
		t.Errorf("no gap: %s", v.Outcome)
	}
	if v := withGaps(pass, gap); v.Outcome != promise.Error || !strings.Contains(v.Reason, "the journal of w1") || v.Evidence[1] != "not watched: "+gap[0] {
		t.Errorf("a gap: %+v", v)
	}
	fail := promise.Verdict{ID: "cluster.no-unexpected-restarts", Outcome: promise.Fail, Reason: "1 restart"}
	if v := withGaps(fail, gap); v.Outcome != promise.Fail {
		t.Errorf("a failure with a gap: %s", v.Outcome)
	}
}
