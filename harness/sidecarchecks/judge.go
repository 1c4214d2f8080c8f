package sidecarchecks

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// The judging of each sidecar check, fed evidence of the shapes the check
// gathers on a cluster - what the fixtures recorded, the objects the API
// answered with, a migration's batches - without one: what the
// catalogue's can-fail table (harness/certification) shows each promise
// failing on. The checks judge with the same functions; a check that
// judges per kubelet judges here per kubelet too, by Kubelet.Name.

// JudgeStartOrder is sidecar.start.order on each kubelet's Pod (startup
// probe or not): what its fixtures recorded and its statuses.
func JudgeStartOrder(kubelets []Kubelet, probe bool, events map[string][]fixtures.Event, pods map[string]*corev1.Pod) promise.Verdict {
	return perKubelet(kubelets, "sidecar.start.order", func(k Kubelet) ([]string, error) {
		line, err := judgeStartOrder(events[k.Name], pods[k.Name], probe)
		if err != nil {
			return nil, fmt.Errorf("startup probe %v: %w", probe, err)
		}
		return []string{line}, nil
	})
}

// JudgeCrashAlone is sidecar.crash.restarts-alone on each kubelet's Pod
// once its sidecar restarted, its app having started at appStarted.
func JudgeCrashAlone(kubelets []Kubelet, after map[string]*corev1.Pod, appStarted map[string]metav1.Time, events map[string][]fixtures.Event) promise.Verdict {
	return perKubelet(kubelets, "sidecar.crash.restarts-alone", func(k Kubelet) ([]string, error) {
		return judgeCrashAlone(after[k.Name], appStarted[k.Name], func() ([]fixtures.Event, error) { return events[k.Name], nil })
	})
}

// JudgeOOMAlone is sidecar.oom.restarts-alone on each kubelet's Pod once
// its sidecar was OOMKilled and restarted, its app having started at
// appStarted.
func JudgeOOMAlone(kubelets []Kubelet, after map[string]*corev1.Pod, appStarted map[string]metav1.Time) promise.Verdict {
	return perKubelet(kubelets, "sidecar.oom.restarts-alone", func(k Kubelet) ([]string, error) {
		return judgeOOMAlone(after[k.Name], appStarted[k.Name])
	})
}

// JudgeHung is sidecar.hung.out-of-service on what each kubelet's Pod was
// seen doing and what its fixtures recorded.
func JudgeHung(kubelets []Kubelet, seen map[string]HungSeen, events map[string][]fixtures.Event) promise.Verdict {
	return perKubelet(kubelets, "sidecar.hung.out-of-service", func(k Kubelet) ([]string, error) {
		return judgeHung(seen[k.Name], events[k.Name])
	})
}

// JudgeFailClosed is sidecar.failure.closed on each kubelet's guarded Pod
// and client events, asked at urls.
func JudgeFailClosed(kubelets []Kubelet, urls ClosedURLs, events map[string][]fixtures.Event) promise.Verdict {
	return perKubelet(kubelets, "sidecar.failure.closed", func(k Kubelet) ([]string, error) {
		return judgeFailClosed(urls, events[k.Name])
	})
}

// JudgeNetworkPolicy is sidecar.network-policy on what each kubelet's
// clients recorded.
func JudgeNetworkPolicy(kubelets []Kubelet, seen map[string]PolicySeen) promise.Verdict {
	return perKubelet(kubelets, "sidecar.network-policy", func(k Kubelet) ([]string, error) {
		return judgeNetworkPolicy(seen[k.Name])
	})
}

// JudgeFailOpen is sidecar.failure.open on what each kubelet's logged
// Pod showed, asked at urls.
func JudgeFailOpen(kubelets []Kubelet, urls OpenURLs, seen map[string]OpenSeen) promise.Verdict {
	return perKubelet(kubelets, "sidecar.failure.open", func(k Kubelet) ([]string, error) {
		return judgeFailOpen(urls, seen[k.Name])
	})
}

// JudgeScheduling is sidecar.resources.scheduling on each kubelet's node:
// the native Pod as last seen Pending and the legacy Pod as bound.
func JudgeScheduling(kubelets []Kubelet, pending, bound map[string]*corev1.Pod) promise.Verdict {
	return perKubelet(kubelets, "sidecar.resources.scheduling", func(k Kubelet) ([]string, error) {
		return judgeScheduling(k.Name, pending[k.Name], bound[k.Name])
	})
}

// JudgeReadinessGates is sidecar.readiness.gates on the Deployment whose
// rollout halted, its Pods and its Service's EndpointSlices.
func JudgeReadinessGates(halted *appsv1.Deployment, pods []corev1.Pod, slices []discoveryv1.EndpointSlice) promise.Verdict {
	ev, err := judgeGates(halted, func() ([]corev1.Pod, error) { return pods, nil }, func() ([]discoveryv1.EndpointSlice, error) { return slices, nil })
	return verdict("sidecar.readiness.gates", ev, err)
}

// JudgeJobCompletes is sidecar.job.completes on each kubelet's Job with a
// native sidecar as last read; one not complete when the check's wait
// would have ended is a failure, as the wait's timeout is.
func JudgeJobCompletes(kubelets []Kubelet, jobs map[string]*batchv1.Job) promise.Verdict {
	return perKubelet(kubelets, "sidecar.job.completes", func(k Kubelet) ([]string, error) {
		done, err := jobCompleted(jobs[k.Name], "")
		if err == nil && !done {
			err = fmt.Errorf("the Job %s did not complete", jobs[k.Name].Name)
		}
		return nil, err
	})
}

// JudgeJobSidecarCrashes is sidecar.job.sidecar-crashes on each kubelet's
// Job once it ended, and its Pods.
func JudgeJobSidecarCrashes(kubelets []Kubelet, jobs map[string]*batchv1.Job, pods map[string][]corev1.Pod) promise.Verdict {
	return perKubelet(kubelets, "sidecar.job.sidecar-crashes", func(k Kubelet) ([]string, error) {
		return judgeCrashLoopJob(jobs[k.Name], pods[k.Name], func() string { return "" })
	})
}

// JudgeQuotaCharge is sidecar.resources.formula on what a quota holding
// the resource check's Pod alone charged (used), the helper a native
// sidecar or a regular container: the check waits, within within, for
// the formula's requests to be charged.
func JudgeQuotaCharge(ctx context.Context, native bool, used corev1.ResourceList, within time.Duration) promise.Verdict {
	c := sizedCases[1]
	if native {
		c = sizedCases[0]
	}
	var charged string
	err := wait.Within(ctx, wait.Budget{Timeout: within, Interval: within / 5}, fmt.Sprintf("ResourceQuota to charge the %s Pod requests.cpu=%s requests.memory=%s", c.name, c.cpu, c.memory),
		func(context.Context) (bool, string, error) {
			var ok bool
			charged, ok = chargedFormula(used, c)
			return ok, "charged " + charged, nil
		})
	var ev []string
	if err == nil {
		ev = []string{fmt.Sprintf("%s helper: ResourceQuota charged %s (formula %s, %s)", c.name, charged, c.cpu, c.memory)}
	}
	return verdict("sidecar.resources.formula", ev, err)
}

// JudgeQuotaAdmission is sidecar.resources.quota-admission on how the API
// answered the create of the native Pod under the quota between the two
// formulas.
func JudgeQuotaAdmission(createErr error) promise.Verdict {
	ev, err := nativeRefused(quotaHard, createErr)
	return verdict("sidecar.resources.quota-admission", ev, err)
}

// Cgroup is a Pod's cgroup v2 directory as the kubelet made it: its path
// and what its cpu.max and memory.max hold.
type Cgroup struct{ Path, CPUMax, MemoryMax string }

// JudgeLimits is sidecar.resources.limits-qos on each kubelet's Pod of the
// limits check, the helper a native sidecar or not, as the API runs it,
// and its cgroup.
func JudgeLimits(kubelets []Kubelet, native bool, pods map[string]*corev1.Pod, cgroups map[string]Cgroup) promise.Verdict {
	c := sizedCases[1]
	if native {
		c = sizedCases[0]
	}
	return perKubelet(kubelets, "sidecar.resources.limits-qos", func(k Kubelet) ([]string, error) {
		want := (&Sidecars{}).sizedPod("ns", k.Name, c, true)
		cg := cgroups[k.Name]
		line, err := judgeLimits(c, pods[k.Name], qosClass(want), effectiveLimit(want, corev1.ResourceCPU), effectiveLimit(want, corev1.ResourceMemory),
			func() (cgroupLimits, error) {
				l := v2Limits(cg.Path, cg.CPUMax, cg.MemoryMax)
				l.qos = qosOfCgroup(cg.Path)
				return l, nil
			})
		if err != nil {
			return nil, fmt.Errorf("%s helper: %w", c.name, err)
		}
		return []string{line}, nil
	})
}

// Stopped is what a terminated Pod of the termination checks left: its
// fixtures' events, how long after the delete it was gone, the lines its
// log agent's sink holds and the agent's own report ("" when it wrote
// none).
type Stopped struct {
	Events  []fixtures.Event
	Deleted time.Time
	Gone    time.Duration
	// Ended is when its last container ended, from its status before it
	// went; zero when no status showed every container ended.
	Ended   time.Time
	Shipped int
	Report  string
}

// judgeStoppedPod is judgeStopped on what s records.
func judgeStoppedPod(s Stopped, tc terminationCase) (string, int, error) {
	return judgeStopped(s.Events, tc, s.Deleted, s.Gone, s.Ended, func() (int, error) { return s.Shipped, nil }, func() (string, error) {
		if s.Report == "" {
			return "", errors.New("no report")
		}
		return s.Report, nil
	})
}

// JudgeReverseOrder is sidecar.termination.reverse-order on each
// kubelet's Pod deleted with time to flush.
func JudgeReverseOrder(kubelets []Kubelet, seen map[string]Stopped) promise.Verdict {
	return perKubelet(kubelets, "sidecar.termination.reverse-order", func(k Kubelet) ([]string, error) {
		return flushedAll(judgeStoppedPod(seen[k.Name], reverseOrderCase))
	})
}

// JudgeBoundedFlush is sidecar.termination.bounded-flush on each
// kubelet's Pod deleted with a backlog larger than its flush budget.
func JudgeBoundedFlush(kubelets []Kubelet, seen map[string]Stopped) promise.Verdict {
	return perKubelet(kubelets, "sidecar.termination.bounded-flush", func(k Kubelet) ([]string, error) {
		return lostSome(judgeStoppedPod(seen[k.Name], boundedFlushCase))
	})
}

// Stubborn is what the Pod whose sidecar ignores SIGTERM left: its
// fixtures' events, when it was deleted, how long after it was gone and
// the lines its app's file holds.
type Stubborn struct {
	Events  []fixtures.Event
	Deleted time.Time
	Gone    time.Duration
	Kept    int
}

// JudgeSIGTERMIgnored is sidecar.termination.sigterm-ignored on each
// kubelet's Pod.
func JudgeSIGTERMIgnored(kubelets []Kubelet, seen map[string]Stubborn) promise.Verdict {
	return perKubelet(kubelets, "sidecar.termination.sigterm-ignored", func(k Kubelet) ([]string, error) {
		s := seen[k.Name]
		line, err := judgeStubborn(s.Events, s.Deleted, s.Gone, func() (int, error) { return s.Kept, nil })
		return []string{line}, err
	})
}

// JudgeStrippedPreflight is sidecar.stripped.preflight on the batches of
// a migration of tg under the stripping webhook.
func JudgeStrippedPreflight(tg sidecar.Target, res []sidecar.BatchResult) promise.Verdict {
	return verdict("sidecar.stripped.preflight", nil, stoppedBefore(tg, res))
}

// JudgeStrippedShapes is sidecar.stripped.shapes on how the API answered
// the create of a stripped sidecar with a startup probe.
func JudgeStrippedShapes(createErr error) promise.Verdict {
	ev, err := probedRejected(createErr)
	return verdict("sidecar.stripped.shapes", ev, err)
}

// JudgeOldClient is sidecar.stripped.old-client on the template the old
// client's read-modify-write stored.
func JudgeOldClient(stored corev1.PodSpec) promise.Verdict {
	return verdict("sidecar.stripped.old-client", nil, droppedByOldClient(stored, []string{CrashingSidecar}))
}

// JudgeMigrationBatches is sidecar.migration.batches on a migration's
// batches, the second one's helper crashing.
func JudgeMigrationBatches(results []sidecar.BatchResult) promise.Verdict {
	ev, err := stoppedAtBreach(results)
	return verdict("sidecar.migration.batches", ev, err)
}

// JudgeMigrationRollback is sidecar.migration.rollback on tg's template
// before the migration and after its rollback.
func JudgeMigrationRollback(tg sidecar.Target, before, after corev1.PodTemplateSpec) promise.Verdict {
	return verdict("sidecar.migration.rollback", nil, backOnLegacy(tg, before, after))
}

// JudgeLeastPrivilege is sidecar.least-privilege on each kubelet's Pod
// the migration made and what its helper and app ran with there.
func JudgeLeastPrivilege(kubelets []Kubelet, pods map[string]*corev1.Pod, helper, app map[string]Privileges) promise.Verdict {
	return perKubelet(kubelets, "sidecar.least-privilege", func(k Kubelet) ([]string, error) {
		return judgeLeastPrivilege(pods[k.Name], helper[k.Name], app[k.Name])
	})
}

// JudgeStopCondition is sidecar.migration.stop-conditions on the batches
// of the migration of the case name, whose breach must name want.
func JudgeStopCondition(name, want string, results []sidecar.BatchResult) promise.Verdict {
	line, err := stoppedFirst(name, want, results)
	return verdict("sidecar.migration.stop-conditions", []string{line}, err)
}

// JudgeWorkerReplaced is sidecar.worker-replaced on what the Pod back on
// the new worker node recorded.
func JudgeWorkerReplaced(node string, events []fixtures.Event) promise.Verdict {
	_, _, _, err := startedInOrder(node, events)
	return verdict("sidecar.worker-replaced", nil, err)
}

// perKubelet is onEach over evidence already gathered.
func perKubelet(kubelets []Kubelet, id promise.ID, judge func(Kubelet) ([]string, error)) promise.Verdict {
	return (&Sidecars{Kubelets: kubelets}).onEach(context.Background(), id, func(_ context.Context, k Kubelet) ([]string, error) { return judge(k) })
}
