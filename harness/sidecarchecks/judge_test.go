package sidecarchecks

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
)

var (
	testKubelets = []Kubelet{{Node: cluster.Node{Name: "w1", Role: cluster.RoleWorker}, Version: "v1.35.4"},
		{Node: cluster.Node{Name: "cp1", Role: cluster.RoleControlPlane}, Version: "v1.36.3"}}
	t0 = time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
)

// onBoth is the same evidence for each test kubelet.
func onBoth[T any](v T) map[string]T { return map[string]T{"w1": v, "cp1": v} }

// seenCase is a unit case of a judge of what each kubelet saw: cp1's
// seen, changed from the good one, and the verdict it must give.
type seenCase[T any] struct {
	name    string
	change  func(*T)
	outcome promise.Outcome
	reason  string
}

// judgeEachCase judges each case with w1 as good and cp1 changed by it.
func judgeEachCase[T any](t *testing.T, good func() T, judge func([]Kubelet, map[string]T) promise.Verdict, cases []seenCase[T]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := good()
			c.change(&seen)
			v := judge(testKubelets, map[string]T{"w1": good(), "cp1": seen})
			if v.Outcome != c.outcome || !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("got %s %q, want %s with %q", v.Outcome, v.Reason, c.outcome, c.reason)
			}
		})
	}
}

// recorded is what fixtures record, "who what" each, 100 ms apart.
func recorded(lines ...string) []fixtures.Event {
	var out []fixtures.Event
	for i, l := range lines {
		who, what, _ := strings.Cut(l, " ")
		out = append(out, fixtures.Event{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), Who: who, What: what})
	}
	return out
}

func running(name string, at time.Time, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}
}

// startFailed is st after a start the container runtime refused.
func startFailed(st corev1.ContainerStatus) corev1.ContainerStatus {
	st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "StartError", ExitCode: 128,
		Message: "failed to create containerd task: ... error setting cgroup config for procHooks process: unable to freeze"}
	return st
}

// Each judge passes on the evidence of its promise held, on both
// kubelets: the judging the checks moved out of their gathering still
// passes what it passed (the can-fail table in harness/certification
// shows each failing).
func TestJudgesPassWhatHolds(t *testing.T) {
	yes, no := true, false
	ready := func(name, ip string, ok corev1.ConditionStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ok}}}}
	}
	done := metav1.NewTime(t0.Add(10 * time.Second))
	crashLoop := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", RestartCount: 3}},
		ContainerStatuses:     []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}}}
	tg := sidecar.Target{Namespace: "ns", Name: "web"}
	legacy := corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app"}, {Name: CrashingSidecar}}}}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "with-probes", field.ErrorList{field.Forbidden(
		field.NewPath("spec", "initContainers").Index(0).Child("startupProbe"), "may not be set for init containers without restartPolicy=Always")})
	for name, v := range map[string]promise.Verdict{
		"start order": JudgeStartOrder(testKubelets, false, onBoth(recorded("proxy start", "app start")),
			onBoth(&corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{running("proxy", t0, 0)},
				ContainerStatuses: []corev1.ContainerStatus{running("app", t0.Add(time.Second), 0)}}})),
		"crash alone": JudgeCrashAlone(testKubelets, onBoth(&corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{running("proxy", t0.Add(6*time.Second), 1)},
			ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}), onBoth(metav1.NewTime(t0)), onBoth(recorded("proxy start", "app start", "proxy crash", "proxy start"))),
		"crash alone, one restart the runtime failed": JudgeCrashAlone(testKubelets, onBoth(&corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{startFailed(running("proxy", t0.Add(20*time.Second), 2))},
			ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}), onBoth(metav1.NewTime(t0)), onBoth(recorded("proxy start", "app start", "proxy crash", "proxy start"))),
		"hung": JudgeHung(testKubelets, onBoth(hungSeen(8*time.Second, 25*time.Second)), onBoth(recorded("proxy start", "proxy hang", "proxy start"))),
		"readiness gates": JudgeReadinessGates(&appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: 1}},
			[]corev1.Pod{ready("web-old", "10.244.1.5", corev1.ConditionTrue), ready("web-new", "10.244.1.6", corev1.ConditionFalse)},
			[]discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
				{Addresses: []string{"10.244.1.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}}}}}),
		"job completes": JudgeJobCompletes(testKubelets, onBoth(&batchv1.Job{Status: batchv1.JobStatus{CompletionTime: &done, Succeeded: 1}})),
		"job sidecar crashes": JudgeJobSidecarCrashes(testKubelets, onBoth(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)},
			Status: batchv1.JobStatus{CompletionTime: &done, Succeeded: 1}}), onBoth([]corev1.Pod{crashLoop})),
		"quota charge": JudgeQuotaCharge(t.Context(), true, corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("600m"),
			corev1.ResourceRequestsMemory: resource.MustParse("160Mi")}, time.Second),
		"quota admission": JudgeQuotaAdmission(apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "native",
			errors.New("exceeded quota: quota, requested: requests.cpu=600m, used: requests.cpu=0, limited: requests.cpu=550m"))),
		"limits": JudgeLimits(testKubelets, true, onBoth(&corev1.Pod{Status: corev1.PodStatus{QOSClass: corev1.PodQOSGuaranteed}}),
			onBoth(Cgroup{Path: "/sys/fs/cgroup/kubepods.slice/kubepods-pod1234.slice", CPUMax: "60000 100000\n", MemoryMax: "167772160\n"})),
		"reverse order": JudgeReverseOrder(testKubelets, onBoth(Stopped{Events: recorded("app sigterm lines=150", "proxy sigterm", "log-agent sigterm"),
			Gone: 2 * time.Second, Shipped: 150})),
		"bounded flush": JudgeBoundedFlush(testKubelets, onBoth(Stopped{Events: recorded("app sigterm lines=1200", "proxy sigterm", "log-agent sigterm"),
			Gone: 6 * time.Second, Shipped: 1000})),
		"sigterm ignored": JudgeSIGTERMIgnored(testKubelets, onBoth(Stubborn{Events: recorded("app sigterm lines=100", "proxy sigterm ignored"),
			Deleted: t0, Gone: 6 * time.Second, Kept: 100})),
		"stripped preflight": JudgeStrippedPreflight(tg, []sidecar.BatchResult{{Targets: []sidecar.Target{tg},
			Breach: "before: initContainers[0] (proxy).restartPolicy is unset, want Always"}}),
		"stripped shapes": JudgeStrippedShapes(invalid),
		"old client":      JudgeOldClient(corev1.PodSpec{InitContainers: []corev1.Container{{Name: CrashingSidecar}}, Containers: []corev1.Container{{Name: "app"}}}),
		"migration batches": JudgeMigrationBatches([]sidecar.BatchResult{{Targets: []sidecar.Target{{Namespace: "a", Name: "web"}}},
			{Targets: []sidecar.Target{{Namespace: "b", Name: "web"}}, Restarts: 1, Breach: "MaxRestarts 0 breached: 1 restart"}}),
		"migration rollback": JudgeMigrationRollback(tg, legacy, *legacy.DeepCopy()),
		"stop condition": JudgeStopCondition("ready-latency", "ReadyWithin 5s breached", []sidecar.BatchResult{{Targets: []sidecar.Target{{Namespace: "ns", Name: "ready-latency"}},
			Breach: "ReadyWithin 5s breached: ns/ready-latency not ready"}}),
		"worker replaced": JudgeWorkerReplaced("w2", recorded("log-agent start", "proxy start", "app start")),
	} {
		if v.Outcome != promise.Pass {
			t.Errorf("%s: %s %s: %s", name, v.ID, v.Outcome, v.Reason)
		}
	}
}

// hungSeen is a hung helper's Pod seen in service before its hang (at
// t0 + 100 ms, as recorded puts it), out and back that long after it.
func hungSeen(out, back time.Duration) HungSeen {
	hung := t0.Add(100 * time.Millisecond)
	return HungSeen{In: t0, Out: hung.Add(out), Back: hung.Add(back), AppStarted: metav1.NewTime(t0),
		Pod: &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{running("proxy", hung.Add(back), 1)},
			ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}}
}

// A hung helper's Pod fails the promise when it leaves service or comes
// back too late, when the app restarted, and when the hang came before
// the Pod was seen in service (nothing to time it from).
func TestHungHelperBounds(t *testing.T) {
	ev := recorded("proxy start", "proxy hang", "proxy start")
	early := hungSeen(8*time.Second, 25*time.Second)
	early.In = t0.Add(time.Second)
	restarted := hungSeen(8*time.Second, 25*time.Second)
	restarted.Pod.Status.ContainerStatuses[0].RestartCount = 1
	for name, c := range map[string]struct {
		seen HungSeen
		want string
	}{
		"out late":      {hungSeen(outOfService+time.Second, 25*time.Second), "over the readiness probe's bound"},
		"back late":     {hungSeen(8*time.Second, backInService+time.Second), "over the liveness probe's bound"},
		"app restarted": {restarted, "the app did not keep running"},
		"hung early":    {early, "before its Pod was first seen in service"},
	} {
		if _, err := judgeHung(c.seen, ev); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := judgeHung(hungSeen(8*time.Second, 25*time.Second), recorded("proxy start", "proxy hang")); err == nil {
		t.Error("a sidecar that never started again passed")
	}
}

// A check judged on every kubelet needs both sides of the skew: on one
// kubelet alone it fails, whatever that one shows.
func TestOneKubeletIsNotEnough(t *testing.T) {
	v := JudgeStartOrder(testKubelets[:1], false, onBoth(recorded("proxy start", "app start")),
		onBoth(&corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{running("proxy", t0, 0)},
			ContainerStatuses: []corev1.ContainerStatus{running("app", t0.Add(time.Second), 0)}}}))
	if v.Outcome != promise.Fail || !strings.Contains(v.Reason, "one side of the skew is not checked") {
		t.Errorf("one kubelet: %+v", v)
	}
}

// A Pod's grace period is counted from the kubelet's first SIGTERM, not
// from the API's delete: a kubelet slow to notice the delete (6.6 s in a
// certify run) does not fail the flush, a Pod held past the bound from
// its first SIGTERM does.
func TestTerminationCountsFromTheKubeletsFirstSIGTERM(t *testing.T) {
	ev := recorded("app sigterm lines=1818", "proxy sigterm", "proxy exit", "log-agent sigterm buffered=1486") // from t0
	stopped := func(noticed, held time.Duration) Stopped {
		return Stopped{Events: ev, Deleted: t0.Add(-noticed), Gone: noticed + held, Shipped: 1000}
	}
	if v := JudgeBoundedFlush(testKubelets, onBoth(stopped(6600*time.Millisecond, 14600*time.Millisecond))); v.Outcome != promise.Pass {
		t.Errorf("noticed after 6.6 s, held 14.6 s from the first SIGTERM: %v, %s", v.Outcome, v.Reason)
	}
	v := JudgeBoundedFlush(testKubelets, onBoth(stopped(time.Second, 22*time.Second)))
	if v.Outcome != promise.Fail || !strings.Contains(v.Reason, "gone 22s after the kubelet's first SIGTERM (1s after the delete)") {
		t.Errorf("held 22 s past a 6 s grace period: %v, %s", v.Outcome, v.Reason)
	}
	// The runtime's end of the containers, when their status showed it,
	// is what the grace period bounds: a Pod whose containers ended in
	// time passes however long its object took to go (27 s in a make e2e,
	// the last container 7.2 s after the first SIGTERM); one whose
	// containers ran past grace and the kubelet's kill margin fails.
	late := stopped(2700*time.Millisecond, 24300*time.Millisecond)
	late.Ended = t0.Add(7 * time.Second) // 7.2 s, to the second
	if v := JudgeBoundedFlush(testKubelets, onBoth(late)); v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "its last container ended 7s after the first SIGTERM") {
		t.Errorf("containers ended 7 s after the first SIGTERM, the Pod gone after 24.3 s: %v, %s %v", v.Outcome, v.Reason, v.Evidence)
	}
	late.Ended = t0.Add(9 * time.Second)
	if v := JudgeBoundedFlush(testKubelets, onBoth(late)); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "last container ended 9s after the kubelet's first SIGTERM, not within its grace period of 6s (bound 9s)") {
		t.Errorf("a container ran 9 s past a 6 s grace period: %v, %s", v.Outcome, v.Reason)
	}
	// The log agent's turn reached past the grace period moves the bound
	// with it (make e2e at 2eadef4: the app's SIGTERM at 04.988, the
	// proxy's at 07.777, the agent's at 12.739 - 7.75 s in - and the last
	// container's end at 14, to the second): it ran 9 s, within what the
	// kubelet gave it. Past that, or told past the kill margin, it fails.
	told := Stopped{Events: []fixtures.Event{
		{At: t0, Who: "app", What: "sigterm lines=1206"},
		{At: t0.Add(2789 * time.Millisecond), Who: "proxy", What: "sigterm"},
		{At: t0.Add(2789 * time.Millisecond), Who: "proxy", What: "exit"},
		{At: t0.Add(7751 * time.Millisecond), Who: "log-agent", What: "sigterm buffered=837"},
	}, Deleted: t0.Add(-time.Second), Gone: 20 * time.Second, Shipped: 1000, Ended: t0.Add(9012 * time.Millisecond)}
	if v := JudgeBoundedFlush(testKubelets, onBoth(told)); v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "ended 9s after the first SIGTERM, the log agent told 7.8s after it") {
		t.Errorf("the agent told 7.75 s in, the last container ended 9 s in: %v, %s %v", v.Outcome, v.Reason, v.Evidence)
	}
	told.Ended = t0.Add(11 * time.Second)
	if v := JudgeBoundedFlush(testKubelets, onBoth(told)); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "ended 11s after the kubelet's first SIGTERM, the log agent told 7.8s after it, not within its grace period of 6s (bound 10.751s)") {
		t.Errorf("the agent told 7.75 s in, the last container ended 11 s in: %v, %s", v.Outcome, v.Reason)
	}
	told.Events[3].At = t0.Add(9500 * time.Millisecond)
	if v := JudgeBoundedFlush(testKubelets, onBoth(told)); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "told the log agent to stop 9.5s after its first SIGTERM, past the grace period of 6s and the kill margin of 3s") {
		t.Errorf("the agent told 9.5 s in: %v, %s", v.Outcome, v.Reason)
	}
	stubborn := func(noticed, held time.Duration) Stubborn {
		return Stubborn{Events: recorded("app sigterm lines=100", "proxy sigterm ignored"), Deleted: t0.Add(-noticed), Gone: noticed + held, Kept: 100}
	}
	if v := JudgeSIGTERMIgnored(testKubelets, onBoth(stubborn(7*time.Second, 12*time.Second))); v.Outcome != promise.Pass {
		t.Errorf("a stubborn sidecar's Pod noticed after 7 s, held 12 s: %v, %s", v.Outcome, v.Reason)
	}
	if v := JudgeSIGTERMIgnored(testKubelets, onBoth(stubborn(7*time.Second, 3*time.Second))); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "killed early") {
		t.Errorf("held 3 s of a 5 s grace period, 10 s after the delete: %v, %s", v.Outcome, v.Reason)
	}
}

// A Pod's containers ended when its status shows every one of them
// terminated: the last one's end; else not known.
func TestLastEnded(t *testing.T) {
	ended := func(name string, at time.Time) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)}}}
	}
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "log-agent"}, {Name: "proxy"}}, Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{ended("log-agent", t0.Add(7*time.Second)), ended("proxy", t0.Add(2*time.Second))},
			ContainerStatuses: []corev1.ContainerStatus{ended("app", t0)}},
	}
	if got := lastEnded(pod); !got.Equal(t0.Add(7 * time.Second)) {
		t.Errorf("all ended: %v, want the log agent's end", got)
	}
	pod.Status.InitContainerStatuses[1] = running("proxy", t0, 0)
	if got := lastEnded(pod); !got.IsZero() {
		t.Errorf("the proxy still running: %v, want not known", got)
	}
	pod.Status.InitContainerStatuses = pod.Status.InitContainerStatuses[:1]
	if got := lastEnded(pod); !got.IsZero() || !lastEnded(nil).IsZero() {
		t.Errorf("a status missing a container: %v, want not known", got)
	}
}

// A crashed sidecar's evidence says how long after its crash it ran
// again, from what it recorded.
func TestCrashAloneSaysTheRecovery(t *testing.T) {
	v := JudgeCrashAlone(testKubelets, onBoth(&corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{running("proxy", t0.Add(6*time.Second), 1)},
		ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}), onBoth(metav1.NewTime(t0)), onBoth(recorded("proxy start", "app start", "proxy crash", "proxy start")))
	if v.Outcome != promise.Pass || len(v.Evidence) != 2 || !strings.Contains(v.Evidence[0], "running again 100ms later") {
		t.Errorf("%s %s: %v", v.Outcome, v.Reason, v.Evidence)
	}
	// A crash before the app started shows nothing of the app running
	// through it: not judged.
	v = JudgeCrashAlone(testKubelets, onBoth(&corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{running("proxy", t0.Add(6*time.Second), 1)},
		ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}), onBoth(metav1.NewTime(t0)), onBoth(recorded("proxy start", "proxy crash", "app start", "proxy start")))
	if v.Outcome != promise.Error || !strings.Contains(v.Reason, "before the app had started") {
		t.Errorf("a crash before the app: %s %s", v.Outcome, v.Reason)
	}
	// Nor an OOM kill before the app's start.
	early := &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{Name: HoggingSidecar, RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(9 * time.Second))}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(t0.Add(-2 * time.Second))}}}},
		ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}
	if v := JudgeOOMAlone(testKubelets, onBoth(early), onBoth(metav1.NewTime(t0))); v.Outcome != promise.Error || !strings.Contains(v.Reason, "before the app started") {
		t.Errorf("an OOM kill before the app: %s %s", v.Outcome, v.Reason)
	}
}

// failClosedURLs and failClosedEvents are a guarded Pod's run as
// CheckFailClosed sees it: served through the proxy, the proxy down from
// 2 s until ready at 3.5 s, every attempt in the outage refused, served again after;
// extra events are added as they are.
var failClosedURLs = ClosedURLs{Service: "http://10.96.0.9:8080/", Proxy: "http://10.244.1.7:8080/", App: "http://10.244.1.7:8081/"}

func failClosedEvents(extra ...fixtures.Event) []fixtures.Event {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	try := func(ms int, ok bool, url string) fixtures.Event {
		what := "fail "
		if ok {
			what = "ok "
		}
		return fixtures.Event{At: at(ms + 5), Who: "client", What: fmt.Sprintf("%s%s began=%d", what, url, at(ms).UnixNano())}
	}
	ev := []fixtures.Event{{At: at(0), Who: "proxy", What: "start"}, {At: at(100), Who: "proxy", What: "ready"}, {At: at(2000), Who: "proxy", What: "crash"},
		{At: at(2600), Who: "proxy", What: "start"}, {At: at(3500), Who: "proxy", What: "ready"}}
	for ms := 1000; ms < 5000; ms += 100 {
		up := ms < 2000 || ms >= 3500
		ev = append(ev, try(ms, up, failClosedURLs.Service), try(ms, up, failClosedURLs.Proxy), try(ms, false, failClosedURLs.App))
		if up {
			ev = append(ev, fixtures.Event{At: at(ms + 2), Who: "app", What: "request via=proxy from=127.0.0.1:4000"})
		}
	}
	return append(ev, extra...)
}

// late is an attempt through the Service begun at, after the outage.
func late(at time.Duration, ok bool) fixtures.Event {
	what := "fail "
	if ok {
		what = "ok "
	}
	return fixtures.Event{At: t0.Add(at + 5*time.Millisecond), Who: "client", What: fmt.Sprintf("%s%s began=%d", what, failClosedURLs.Service, t0.Add(at).UnixNano())}
}

// sidecar.failure.closed: passes on the closed path; fails on a request
// around the proxy and on one served in the outage; is an error where
// the client saw no outage to judge.
func TestFailClosed(t *testing.T) {
	judge := func(ev []fixtures.Event) promise.Verdict {
		return JudgeFailClosed(testKubelets, failClosedURLs, onBoth(ev))
	}
	if v := judge(failClosedEvents()); v.Outcome != promise.Pass {
		t.Fatalf("the closed path: %s %s", v.Outcome, v.Reason)
	} else {
		t.Log(v.Evidence[0])
	}
	// Begun the moment the proxy turned ready, answered by it: at the
	// outage's edge, not judged (a certify run met it, session 36).
	edge := fixtures.Event{At: t0.Add(3510 * time.Millisecond), Who: "client", What: fmt.Sprintf("ok %s began=%d", failClosedURLs.Service, t0.Add(3499500*time.Microsecond).UnixNano())}
	if v := judge(failClosedEvents(edge)); v.Outcome != promise.Pass {
		t.Errorf("an attempt at the outage's edge: %s %s", v.Outcome, v.Reason)
	}
	direct := fixtures.Event{At: t0.Add(4 * time.Second), Who: "client", What: fmt.Sprintf("ok %s began=%d", failClosedURLs.App, t0.Add(4*time.Second).UnixNano())}
	around := fixtures.Event{At: t0.Add(4 * time.Second), Who: "app", What: "request via=none from=10.244.2.3:5000"}
	inOutage := fixtures.Event{At: t0.Add(2500 * time.Millisecond), Who: "client", What: fmt.Sprintf("ok %s began=%d", failClosedURLs.Service, t0.Add(2400*time.Millisecond).UnixNano())}
	for name, c := range map[string]struct {
		ev   []fixtures.Event
		want promise.Outcome
		says string
	}{
		"the app's own port answered":            {failClosedEvents(direct), promise.Fail, "around its proxy"},
		"the app served a request not forwarded": {failClosedEvents(around), promise.Fail, "did not come through its proxy"},
		"the Service served in the outage":       {failClosedEvents(inOutage), promise.Fail, "while the proxy was down"},
		"the proxy never crashed":                {recorded("proxy start", "app start"), promise.Error, "never crashed"},
		"the Service never served again": {slices.DeleteFunc(failClosedEvents(late(25*time.Second, false)), func(e fixtures.Event) bool {
			return strings.HasPrefix(e.What, "ok "+failClosedURLs.Service) && e.At.After(t0.Add(3*time.Second))
		}), promise.Fail, "never served the client again"},
		"served again only after 25 s": {slices.DeleteFunc(failClosedEvents(late(25*time.Second, true)), func(e fixtures.Event) bool {
			return strings.HasPrefix(e.What, "ok "+failClosedURLs.Service) && e.At.After(t0.Add(3*time.Second)) && e.At.Before(t0.Add(20*time.Second))
		}), promise.Fail, "over the bound"},
		"the client stopped trying": {slices.DeleteFunc(failClosedEvents(), func(e fixtures.Event) bool {
			return strings.HasPrefix(e.What, "ok "+failClosedURLs.Service) && e.At.After(t0.Add(3*time.Second))
		}), promise.Error, "the recovery was not seen"},
		"no attempt in the outage": {slices.DeleteFunc(failClosedEvents(), func(e fixtures.Event) bool {
			return e.Who == "client" && e.At.After(t0.Add(2*time.Second)) && e.At.Before(t0.Add(3600*time.Millisecond))
		}), promise.Error, "cannot be judged"},
	} {
		v := judge(c.ev)
		if v.Outcome != c.want || !strings.Contains(v.Reason, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", name, v.Outcome, v.Reason, c.want, c.says)
		}
	}
}

// openSeen is a logged Pod's run as CheckFailOpen sees it: the agent down
// from 2 s to 2.8 s, the app answering at its address throughout, lines
// 1-40 written and each shipped once.
var openURLs = OpenURLs{Service: "http://10.96.0.8:8080/", App: "http://10.244.1.9:8080/"}

func openSeen() OpenSeen {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := []fixtures.Event{{At: at(0), Who: CrashingAgent, What: "start"}, {At: at(10), Who: "app", What: "start proxy-ready=unknown"},
		{At: at(2000), Who: CrashingAgent, What: "crash buffered=3 shipped=20"}, {At: at(2800), Who: CrashingAgent, What: "start"}}
	var log strings.Builder
	for ms := 1000; ms < 5000; ms += 100 {
		ev = append(ev, fixtures.Event{At: at(ms + 5), Who: "client", What: fmt.Sprintf("ok %s began=%d", openURLs.App, at(ms).UnixNano())},
			fixtures.Event{At: at(ms + 5), Who: "client", What: fmt.Sprintf("ok %s began=%d", openURLs.Service, at(ms).UnixNano())})
		fmt.Fprintf(&log, "line %d\n", (ms-1000)/100+1)
	}
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}
	return OpenSeen{Events: ev, Pod: pod, Log: log.String(), Shipped: log.String()}
}

// sidecar.failure.open: passes on the app serving through its helper's
// outage with every line shipped once; fails on a direct attempt refused,
// the app restarted, a line lost or shipped twice; an error where no
// outage was seen.
func TestFailOpen(t *testing.T) {
	judge := func(s OpenSeen) promise.Verdict { return JudgeFailOpen(testKubelets, openURLs, onBoth(s)) }
	if v := judge(openSeen()); v.Outcome != promise.Pass {
		t.Fatalf("fails open: %s %s", v.Outcome, v.Reason)
	} else {
		t.Log(v.Evidence[0])
	}
	// Out of the Service a moment: measured, not judged.
	dropped := openSeen()
	dropped.Events = append(dropped.Events, fixtures.Event{At: t0.Add(3100 * time.Millisecond), Who: "client",
		What: fmt.Sprintf("fail %s began=%d connection refused", openURLs.Service, t0.Add(3000*time.Millisecond).UnixNano())})
	if v := judge(dropped); v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "1 attempt(s) from the crash on failed, the last begun 1s after it") {
		t.Errorf("a Service attempt refused after the crash: %s %q %v", v.Outcome, v.Reason, v.Evidence)
	}
	refused, restarted, lost, twice, noCrash := openSeen(), openSeen(), openSeen(), openSeen(), openSeen()
	refused.Events = append(refused.Events, fixtures.Event{At: t0.Add(2300 * time.Millisecond), Who: "client",
		What: fmt.Sprintf("fail %s began=%d connection refused", openURLs.App, t0.Add(2200*time.Millisecond).UnixNano())})
	restarted.Pod = &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running("app", t0.Add(2*time.Second), 1)}}}
	lost.Shipped = strings.Replace(lost.Shipped, "line 21\n", "", 1)
	twice.Shipped += "line 21\n"
	noCrash.Events = slices.DeleteFunc(noCrash.Events, func(e fixtures.Event) bool { return strings.HasPrefix(e.What, "crash") })
	for name, c := range map[string]struct {
		seen OpenSeen
		want promise.Outcome
		says string
	}{
		"the app refused at its address": {refused, promise.Fail, "did not answer the client at its own address"},
		"the app restarted":              {restarted, promise.Fail, "did not run on"},
		"a line lost":                    {lost, promise.Fail, "1 were never shipped"},
		"a line shipped twice":           {twice, promise.Fail, "1 shipped twice"},
		"the agent never crashed":        {noCrash, promise.Error, "never crashed"},
	} {
		if v := judge(c.seen); v.Outcome != c.want || !strings.Contains(v.Reason, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", name, v.Outcome, v.Reason, c.want, c.says)
		}
	}
}

// sidecar.resources.scheduling: passes on the native Pod Pending for
// want of slots and the legacy one bound; fails on the native Pod bound,
// Pending for another reason, or the legacy Pod elsewhere.
func TestScheduling(t *testing.T) {
	pending := func(msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
	}
	wanting := pending("0/5 nodes are available: 1 Insufficient skewer.io/slot, 4 node(s) didn't match Pod's node affinity/selector.")
	bound := func(node string) map[string]*corev1.Pod {
		return map[string]*corev1.Pod{"w1": {Spec: corev1.PodSpec{NodeName: node}}, "cp1": {Spec: corev1.PodSpec{NodeName: "cp1"}}}
	}
	if v := JudgeScheduling(testKubelets, onBoth(wanting), bound("w1")); v.Outcome != promise.Pass {
		t.Fatalf("Pending for want of slots, legacy bound: %s %s", v.Outcome, v.Reason)
	} else if !unschedulable(wanting) || scheduledPod(wanting) {
		t.Errorf("the conditions read wrong: unschedulable %v, scheduled %v", unschedulable(wanting), scheduledPod(wanting))
	}
	overCommitted := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "w1"}}
	for name, c := range map[string]struct {
		pending *corev1.Pod
		bound   map[string]*corev1.Pod
		says    string
	}{
		"native bound":           {overCommitted, bound("w1"), "over-committed"},
		"pending for a taint":    {pending("0/5 nodes are available: 1 node(s) had untolerated taint"), bound("w1"), "not for want of skewer.io/slot"},
		"legacy bound elsewhere": {wanting, bound("w2"), "not to w1"},
	} {
		if v := JudgeScheduling(testKubelets, onBoth(c.pending), c.bound); v.Outcome != promise.Fail || !strings.Contains(v.Reason, c.says) {
			t.Errorf("%s: %s %q, want fail saying %q", name, v.Outcome, v.Reason, c.says)
		}
	}
}

// oomPod is the OOM check's Pod once its sidecar was killed for memory
// (reason) and restarted; the app started at t0 with appRestarts.
func oomPod(reason string, appStarted time.Time, appRestarts int32) *corev1.Pod {
	hog := running(HoggingSidecar, t0.Add(7*time.Second), 1)
	hog.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: reason, ExitCode: 137, FinishedAt: metav1.NewTime(t0.Add(6 * time.Second))}
	return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{hog},
		ContainerStatuses: []corev1.ContainerStatus{running("app", appStarted, appRestarts)}}}
}

// sidecar.oom.restarts-alone: passes when the app ran on; fails when it
// restarted with its sidecar; an error when the sidecar was not killed
// for memory.
func TestOOMAlone(t *testing.T) {
	started := onBoth(metav1.NewTime(t0))
	if v := JudgeOOMAlone(testKubelets, onBoth(oomPod("OOMKilled", t0, 0)), started); v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "OOMKilled at") || !strings.Contains(v.Evidence[0], "limit 48Mi") {
		t.Errorf("the app ran on: %s %s %v", v.Outcome, v.Reason, v.Evidence)
	}
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		want promise.Outcome
	}{
		"the app restarted too":        {oomPod("OOMKilled", t0.Add(8*time.Second), 1), promise.Fail},
		"the app started again":        {oomPod("OOMKilled", t0.Add(8*time.Second), 0), promise.Fail},
		"the sidecar exited otherwise": {oomPod("Error", t0, 0), promise.Error},
	} {
		if v := JudgeOOMAlone(testKubelets, onBoth(c.pod), started); v.Outcome != c.want {
			t.Errorf("%s: %s %s, want %s", name, v.Outcome, v.Reason, c.want)
		}
	}
}

// A Pod out of service before its sidecar hung times a flap, not the
// hang: not judged.
func TestHungOutBeforeTheHang(t *testing.T) {
	seen := hungSeen(8*time.Second, 25*time.Second)
	seen.Out = seen.In.Add(50 * time.Millisecond) // the hang is at +100ms
	if _, err := judgeHung(seen, recorded("proxy start", "proxy hang", "proxy start")); !errors.Is(err, errUnjudged) {
		t.Errorf("out before the hang: %v", err)
	}
}

// The hung helper's Pod is in service only when its app is seen running
// too: a Pod read a moment before it turned ready has no app start yet.
func TestInService(t *testing.T) {
	waiting := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}}}}
	started := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{running("app", t0, 0)}}}
	if inService(waiting, true) || inService(started, false) || !inService(started, true) {
		t.Error("in service only with a ready endpoint and the app running")
	}
}

// The expansion must stop on the crash it is made to show: a second
// batch stopped by another breach (its preflight refused) shows nothing
// of a restart's breach.
func TestMigrationBatchesStopOnTheCrash(t *testing.T) {
	b := func(ns, breach string) sidecar.BatchResult {
		return sidecar.BatchResult{Targets: []sidecar.Target{{Namespace: ns, Name: "web"}}, Breach: breach}
	}
	if v := JudgeMigrationBatches([]sidecar.BatchResult{b("a", ""), b("b", "before: restartPolicy dropped")}); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "another breach") {
		t.Errorf("stopped by a preflight: %s %s", v.Outcome, v.Reason)
	}
}
