package sidecar

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func TestToNativeAndBack(t *testing.T) {
	legacy := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		ServiceAccountName: "web",
		InitContainers:     []corev1.Container{{Name: "setup"}},
		Containers: []corev1.Container{
			{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "proxy", Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 15000}}},
		},
		Volumes: []corev1.Volume{{Name: "shared"}},
	}}
	native, err := NativeSpec(legacy.Spec, []string{"proxy"})
	if err != nil {
		t.Fatal(err)
	}
	if len(native.Containers) != 1 || native.InitContainers[0].Name != "proxy" || native.InitContainers[1].Name != "setup" {
		t.Fatalf("ToNative = %+v", native)
	}
	if rp := native.InitContainers[0].RestartPolicy; rp == nil || *rp != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the helper is not a native sidecar: %v", rp)
	}
	if native.InitContainers[0].Ports[0].ContainerPort != 15000 {
		t.Error("the helper lost its port")
	}
	migrated := corev1.PodTemplateSpec{Spec: native}
	err = SameTemplate(legacy, migrated)
	if err == nil || !strings.Contains(err.Error(), "template hash") {
		t.Errorf("SameTemplate(legacy, native) = %v, want a hash difference", err)
	}
	if err := SameTemplate(legacy, *legacy.DeepCopy()); err != nil {
		t.Errorf("SameTemplate of a copy = %v", err)
	}
	if _, err := NativeSpec(legacy.Spec, []string{"mesh"}); err == nil {
		t.Error("want an error for a helper that is not there")
	}
	if _, err := NativeSpec(legacy.Spec, []string{"app", "proxy"}); err == nil {
		t.Error("want an error when no container is left")
	}
}

func TestStopConditionsValidate(t *testing.T) {
	for _, tc := range []struct {
		stop StopConditions
		want string // "" when valid
	}{
		{StopConditions{ReadyWithin: time.Minute}, ""},
		{StopConditions{ReadyWithin: time.Minute, MaxRestarts: 2}, ""},
		{StopConditions{}, "ReadyWithin 0s is not positive"},
		{StopConditions{ReadyWithin: -time.Second}, "ReadyWithin -1s is not positive"},
		{StopConditions{ReadyWithin: time.Minute, MaxRestarts: -1}, "MaxRestarts -1 is negative"},
		{StopConditions{ReadyWithin: time.Minute, MaxReadinessFailures: -1}, "MaxReadinessFailures -1 is negative"},
		{StopConditions{ReadyWithin: time.Minute, MaxUnavailable: -1}, "MaxUnavailable -1 is negative"},
		{StopConditions{ReadyWithin: time.Minute, MaxLostLines: -1}, "MaxLostLines -1 is negative"},
		{StopConditions{ReadyWithin: time.Minute, MaxLostLines: 3}, "MaxLostLines 3 is set but no LostLines counts the lines"},
	} {
		checkError(t, tc.stop.Validate(), tc.want, "%+v.Validate()", tc.stop)
	}
}

func TestMigrationValidate(t *testing.T) {
	valid := func() *Migration {
		return &Migration{Client: panicClient{}, Helpers: []string{"proxy"},
			Batches: [][]Target{{{"a", "web"}}, {{"b", "web"}, {"c", "web"}}},
			Stop:    StopConditions{ReadyWithin: time.Minute}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Migration)
		want   string // "" when valid
	}{
		{"valid", func(*Migration) {}, ""},
		{"no client", func(m *Migration) { m.Client = nil }, "no Client"},
		{"no helpers", func(m *Migration) { m.Helpers = nil }, "no Helpers"},
		{"no batches", func(m *Migration) { m.Batches = nil }, "no Batches and no Selections"},
		{"selections instead", func(m *Migration) { m.Batches, m.Selections = nil, []Selection{{Namespace: "a"}} }, ""},
		{"both ways", func(m *Migration) { m.Selections = []Selection{{Namespace: "a"}} }, "both Batches and Selections"},
		{"a selection of everything", func(m *Migration) { m.Batches, m.Selections = nil, []Selection{{Namespace: "a"}, {}} }, "selection 2: a selection needs"},
		{"an empty batch", func(m *Migration) { m.Batches = append(m.Batches, nil) }, "batch 3 is empty"},
		{"negative settle", func(m *Migration) { m.Settle = -time.Second }, "Settle -1s is negative"},
		{"zero stop conditions", func(m *Migration) { m.Stop = StopConditions{} }, "ReadyWithin 0s is not positive"},
	} {
		m := valid()
		tc.change(m)
		checkError(t, m.Validate(), tc.want, "%s: Validate()", tc.name)
	}
}

// Run refuses an invalid migration before it touches anything: the
// client panics at the first call.
func TestRunValidatesFirst(t *testing.T) {
	m := &Migration{Client: panicClient{}, Helpers: []string{"proxy"}, Batches: [][]Target{{{"a", "web"}}}}
	out, err := m.Run(context.Background())
	if err == nil || out != nil {
		t.Fatalf("Run = %v, %v, want no results and an error", out, err)
	}
}

// A batch's rollout that does not finish by its deadline is a breach that
// says what it last saw, and the worst look at its unavailable replicas;
// every look keeps the batch's Pods seen running.
func TestWaitRolledOutSaysWhatItSaw(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", Generation: 2},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 1}}
	pod := func(name string, phase corev1.PodPhase, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: types.UID(name), Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
	}
	web := map[string]string{"app": "web"}
	cs := fake.NewClientset(d, pod("running", corev1.PodRunning, web), pod("pending", corev1.PodPending, web), pod("other", corev1.PodRunning, map[string]string{"app": "db"}))
	batch := []Target{{"a", "web"}}
	ran := map[types.UID]corev1.Pod{}
	worst, err := waitRolledOut(context.Background(), cs, batch, time.Now().Add(50*time.Millisecond), ran)
	want := "waiting for [a/web] rolled out: last seen: a/web: 1 updated, 1 available, 3 total of 2"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("waitRolledOut = %v, want it to say %q", err, want)
	}
	if worst.Replicas != 1 || worst.Of != 2 || worst.Target != batch[0] {
		t.Errorf("worst look = %+v, want 1 of 2 of a/web", worst)
	}
	if len(ran) != 1 || ran["running"].Name != "running" {
		t.Errorf("Pods seen running: %v, want the batch's running one only", ran)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
	if _, err := cs.AppsV1().Deployments("a").Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	worst, err = waitRolledOut(context.Background(), cs, batch, time.Now().Add(-time.Second), ran)
	if err != nil || worst.Replicas != 0 {
		t.Errorf("waitRolledOut of a rolled-out Deployment past the deadline = %+v, %v, want one look, none unavailable and nil", worst, err)
	}
}

// A batch that lost Pods during its rollout besides those it replaced (a
// node drained under it) says which moved, and counts their lost lines
// with the replaced ones' once both are gone.
func TestSettledAccountsForMovedPods(t *testing.T) {
	web := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: web}}}
	pod := func(name string, created int) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: types.UID(name), Labels: web, CreationTimestamp: metav1.Unix(int64(created), 0)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	legacy, evicted, refilled, now := pod("legacy", 1), pod("native-evicted", 3), pod("legacy-refilled", 2), pod("native-now", 4)
	cs := fake.NewClientset(d, &now)
	var counted []string
	m := &Migration{Client: cs, Helpers: []string{"proxy"}, Stop: StopConditions{ReadyWithin: time.Minute, LostLines: func(_ context.Context, pods []corev1.Pod) (int, error) {
		for _, p := range pods {
			counted = append(counted, p.Name)
		}
		return 3, nil
	}}}
	res := BatchResult{Targets: []Target{{"a", "web"}}, Replaced: []corev1.Pod{legacy}}
	ran := map[types.UID]corev1.Pod{legacy.UID: legacy, evicted.UID: evicted, refilled.UID: refilled, now.UID: now}
	if err := m.settled(context.Background(), &res, ran); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range res.Moved {
		names = append(names, p.Name)
	}
	if strings.Join(names, " ") != "legacy-refilled native-evicted" || strings.Join(counted, " ") != "legacy legacy-refilled native-evicted" || res.LostLines != 3 {
		t.Errorf("moved %v, lines counted of %v (%d lost); want the refilled and the evicted Pods moved, counted with the replaced one", names, counted, res.LostLines)
	}
}

func ptr[T any](v T) *T { return &v }

// A batch breaches every condition it exceeds, each saying what it saw;
// at the bound it breaches none.
func TestBreaches(t *testing.T) {
	count := func(context.Context, []corev1.Pod) (int, error) { return 0, nil }
	stop := StopConditions{ReadyWithin: time.Minute, MaxRestarts: 1, MaxReadinessFailures: 2, MaxUnavailable: 1, MaxLostLines: 5, LostLines: count}
	at := BatchResult{Restarts: 1, ReadinessFailures: 2, Unavailable: Unavailable{Replicas: 1, Of: 2}, LostLines: 5}
	if b := stop.breaches(at, time.Second); len(b) != 0 {
		t.Errorf("breaches at the bounds = %q, want none", b)
	}
	over := BatchResult{Restarts: 2, ReadinessFailures: 3, Unavailable: Unavailable{Target: Target{"a", "web"}, Replicas: 2, Of: 2}, LostLines: 6,
		Replaced: []corev1.Pod{{}, {}}}
	got := strings.Join(stop.breaches(over, time.Second), "; ")
	for _, want := range []string{"MaxUnavailable 1 breached: 2 of 2 replicas of a/web unavailable", "MaxRestarts 1 breached: 2 container restarts",
		"MaxReadinessFailures 2 breached: 3 readiness probe failures", "MaxLostLines 5 breached: 6 lines lost by the 2 Pods"} {
		if !strings.Contains(got, want) {
			t.Errorf("breaches = %q, want it to say %q", got, want)
		}
	}
	stop.LostLines = nil
	if got := strings.Join(stop.breaches(over, time.Second), "; "); strings.Contains(got, "MaxLostLines") {
		t.Errorf("breaches without a counter = %q, want no MaxLostLines", got)
	}
}

// A selection of everything, or one that does not parse, is refused
// before the API server is asked.
func TestSelectionValidate(t *testing.T) {
	for _, tc := range []struct {
		sel  Selection
		want string
	}{
		{Selection{Namespace: "a"}, ""},
		{Selection{LabelSelector: "tier=web"}, ""},
		{Selection{Namespace: "a", LabelSelector: "tier in (web,api)"}, ""},
		{Selection{}, "a selection needs a namespace or a label selector"},
		{Selection{Namespace: "a", LabelSelector: "tier in (web"}, `label selector "tier in (web"`},
	} {
		checkError(t, tc.sel.Validate(), tc.want, "%+v.Validate()", tc.sel)
	}
}

func checkError(t *testing.T, err error, want string, format string, args ...any) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf(format+" = %v, want nil", append(args, err)...)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf(format+" = %v, want an error saying %q", append(args, err, want)...)
	}
}

// panicClient is a Client any call to which panics.
type panicClient struct{ kubernetes.Interface }

// Admitted names what differs from a migrated Pod's shape: the container
// and the field.
func TestAdmitted(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := func(name string) corev1.Container { return corev1.Container{Name: name, RestartPolicy: &always} }
	helpers := []string{"proxy", "logs"}
	for _, tc := range []struct {
		name       string
		init, main []corev1.Container
		want       string // "" when admitted as migrated
	}{
		{"migrated", []corev1.Container{sidecar("proxy"), sidecar("logs"), {Name: "setup"}}, []corev1.Container{{Name: "app"}}, ""},
		{"restartPolicy dropped", []corev1.Container{{Name: "proxy"}, sidecar("logs")}, []corev1.Container{{Name: "app"}},
			"initContainers[0] (proxy).restartPolicy is unset, want Always"},
		{"order changed", []corev1.Container{sidecar("logs"), sidecar("proxy")}, []corev1.Container{{Name: "app"}},
			"initContainers[1] is proxy, want it at 0"},
		{"still legacy", []corev1.Container{sidecar("logs")}, []corev1.Container{{Name: "app"}, {Name: "proxy"}},
			"containers[proxy] is a regular container"},
		{"gone", []corev1.Container{sidecar("proxy")}, []corev1.Container{{Name: "app"}}, "logs is gone from the Pod"},
	} {
		checkError(t, Admitted(corev1.PodSpec{InitContainers: tc.init, Containers: tc.main}, helpers), tc.want, "%s: Admitted", tc.name)
	}
}

// A crash counts from the moment it happens, not from the restart the
// kubelet makes after its back-off (RestartCount moves only then): the
// status a helper that crashed 3 s into its Pod shows for the next 10 s.
func TestRestartsCountACrashInBackOff(t *testing.T) {
	crashed := corev1.ContainerStatus{Name: "proxy", RestartCount: 0,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	justEnded := corev1.ContainerStatus{Name: "proxy", RestartCount: 1,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	restarted := corev1.ContainerStatus{Name: "proxy", RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	starting := corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	running := corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	for _, c := range []struct {
		init, main []corev1.ContainerStatus
		want       int32
	}{
		{[]corev1.ContainerStatus{crashed}, []corev1.ContainerStatus{running}, 1},
		{[]corev1.ContainerStatus{justEnded}, []corev1.ContainerStatus{running}, 2},
		{[]corev1.ContainerStatus{restarted}, []corev1.ContainerStatus{running}, 1},
		{nil, []corev1.ContainerStatus{starting, running}, 0},
	} {
		pod := corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: c.init, ContainerStatuses: c.main}}
		if got := Restarts([]corev1.Pod{pod}); got != c.want {
			t.Errorf("%+v %+v: %d restarts, want %d", c.init, c.main, got, c.want)
		}
	}
}
