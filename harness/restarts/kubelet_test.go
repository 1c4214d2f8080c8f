package restarts

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// A container restart reported without its last state carries what the
// kubelet said of its Pod up to the restart - its events for that Pod,
// oldest first, none after, none of another Pod - and says so when the
// kubelet's log cannot be read; a failed verdict shows it.
func TestARestartWithoutLastStateCarriesTheKubeletsRecord(t *testing.T) {
	started := time.Date(2026, 12, 6, 21, 28, 53, 0, time.UTC)
	event := func(name, uid, reason, msg string, at time.Time, count int32) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Reason: reason, Message: msg, Count: count,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: types.UID(uid)},
			LastTimestamp:  metav1.NewTime(at), Source: corev1.EventSource{Component: "kubelet", Host: "w"}}
	}
	cs := fake.NewClientset(
		event("a", "u", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.", started.Add(-9*time.Second), 1),
		event("b", "u", "Scheduled", "assigned ns/p to w", started.Add(-40*time.Second), 0),
		event("c", "other", "Killing", "another Pod's", started.Add(-5*time.Second), 1),
		event("d", "u", "Killing", "after the restart", started.Add(time.Minute), 1),
		event("e", "u", "Started", "Started container app", started, 2))
	m := &Monitor{cs: cs, logCtx: context.Background(), seen: []Event{{Kind: Container}}}
	e := Event{Kind: Container, Time: started, Node: "skewer-no-such-node", Namespace: "ns", Pod: "p", Container: "app", Count: 1,
		NoLastState: "timed by the new instance's start"}
	m.readKubeletRecord(0, e, "u")
	got := m.seen[0].Kubelet
	want := []string{"event 21:28:13 Scheduled by kubelet: assigned ns/p to w",
		"event 21:28:44 SandboxChanged by kubelet: Pod sandbox changed, it will be killed and re-created.",
		"event 21:28:53 Started (x2) by kubelet: Started container app"}
	if len(got) != 4 || strings.Join(got[:3], "\n") != strings.Join(want, "\n") || !strings.HasPrefix(got[3], "(the kubelet's log could not be read: ") {
		t.Fatalf("the kubelet's record:\n%s\nwant\n%s\nand the log's error", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	e.Kubelet = got
	v := Check([]Event{e}, func(Event) bool { return false })
	if !strings.Contains(v.Reason, "the kubelet on the Pod: event 21:28:13 Scheduled") {
		t.Errorf("the verdict does not show the kubelet's record: %s", v.Reason)
	}
}

// The kubelet's lines that name a Pod are the ones klog writes with
// pod="namespace/name" - not a Pod whose name only begins the same.
func TestLinesNaming(t *testing.T) {
	log := `I1206 21:28:40 kuberuntime_manager.go:1100] "No ready sandbox for pod can be found. Need to start a new one" pod="ns/p"
I1206 21:28:41 kubelet.go:2500] "SyncLoop UPDATE" source="api" pods=["ns/p-2"]
E1206 21:28:42 pod_workers.go:1301] "Error syncing pod, skipping" err="failed" pod="ns/p" podUID="u"`
	got := linesNaming(log, "ns/p", 1)
	if len(got) != 1 || !strings.HasPrefix(got[0], `kubelet: E1206 21:28:42 pod_workers.go:1301] "Error syncing pod`) {
		t.Errorf("lines naming ns/p (the last): %q", got)
	}
	if got := linesNaming(log, "ns/p", 5); len(got) != 2 {
		t.Errorf("lines naming ns/p: %q", got)
	}
}

// A previous instance the kubelet created and never started is reported
// as a last state that is waiting (kubelet_pods.go convertContainerStatus:
// a created container is "waiting to be running"), and the event says
// so: session 34's app container, count 1 with no terminated last state.
func TestAPreviousInstanceNeverStartedIsSaid(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel() // no log reads
	m := &Monitor{journals: done, controlPlanes: map[string]bool{}, evicted: map[types.UID]bool{}}
	started := time.Date(2026, 12, 6, 21, 28, 53, 0, time.UTC)
	pod := func(st corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unavailable-76cbf975b5-c2jvn", Namespace: "skewer-sidecar-1", UID: "u"},
			Spec: corev1.PodSpec{NodeName: "w"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}
	}
	m.comparePods(pod(corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}),
		pod(corev1.ContainerStatus{Name: "app", RestartCount: 1, LastTerminationState: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}},
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}))
	got := m.Events()
	if len(got) != 1 || !got[0].NeverStarted || !got[0].Time.Equal(started) ||
		!strings.Contains(got[0].String(), "(count 1, its previous instance was created and never started; timed by the new instance's start)") {
		t.Errorf("events: %v", got)
	}
}
