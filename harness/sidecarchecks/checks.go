package sidecarchecks

import (
	"context"
	"slices"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/restarts"
)

// A Check is one of the sidecar checks: the promises it judges, whether
// it crashes CrashingSidecar on purpose, and how it runs. A check of
// Alone runs in a phase of its own, named Phase, and says what it
// restarts on purpose on the kubelets' nodes (Restarts, by the words of
// the restarts package).
type Check struct {
	IDs      []promise.ID
	Crashes  bool
	Run      func(*Sidecars, context.Context) []promise.Verdict
	Phase    string
	Restarts []string
}

// one is a check of one verdict as a check of several.
func one(check func(*Sidecars, context.Context) promise.Verdict) func(*Sidecars, context.Context) []promise.Verdict {
	return func(s *Sidecars, ctx context.Context) []promise.Verdict { return []promise.Verdict{check(s, ctx)} }
}

func ids(ids ...promise.ID) []promise.ID { return ids }

// Checks are the checks that may run together, ChecksAtOnce at a time,
// the longest first. They share nothing but the cluster: each has its own
// namespaces, the stripping webhook mutates only the namespace it is made
// for, and none changes a node but by a resource no other check asks for
// (the scheduling check's slots, taken away after it).
var Checks = []Check{
	{IDs: ids("sidecar.migration.batches", "sidecar.migration.rollback"), Crashes: true, Run: (*Sidecars).CheckMigration},
	{IDs: ids("sidecar.migration.stop-conditions"), Crashes: true, Run: one((*Sidecars).CheckStopConditions)},
	{IDs: ids("sidecar.canary.compared"), Run: one((*Sidecars).CheckCanary)},
	{IDs: ids("sidecar.termination.reverse-order", "sidecar.termination.bounded-flush"), Run: (*Sidecars).CheckTermination},
	{IDs: ids("sidecar.stripped.preflight", "sidecar.stripped.shapes"), Crashes: true, Run: (*Sidecars).CheckStripped},
	{IDs: ids("sidecar.job.completes"), Run: one((*Sidecars).CheckJobs)},
	{IDs: ids("sidecar.job.sidecar-crashes"), Run: one((*Sidecars).CheckJobSidecarCrashes)},
	{IDs: ids("sidecar.stripped.old-client"), Crashes: true, Run: one((*Sidecars).CheckOldClient)},
	{IDs: ids("sidecar.resources.formula", "sidecar.resources.quota-admission"), Run: (*Sidecars).CheckResources},
	{IDs: ids("sidecar.hung.out-of-service"), Crashes: true, Run: one((*Sidecars).CheckHungHelper)},
	{IDs: ids("sidecar.failure.closed"), Crashes: true, Run: one((*Sidecars).CheckFailClosed)},
	{IDs: ids("sidecar.failure.open"), Crashes: true, Run: one((*Sidecars).CheckFailOpen)},
	{IDs: ids("sidecar.least-privilege"), Run: one((*Sidecars).CheckLeastPrivilege)},
	{IDs: ids("sidecar.network-policy"), Run: one((*Sidecars).CheckNetworkPolicy)},
	{IDs: ids("sidecar.start.order"), Run: one((*Sidecars).CheckStartOrder)},
	{IDs: ids("sidecar.crash.restarts-alone"), Run: one((*Sidecars).CheckCrashAlone)},
	{IDs: ids("sidecar.oom.restarts-alone"), Crashes: true, Run: one((*Sidecars).CheckOOMAlone)},
	{IDs: ids("sidecar.resources.limits-qos"), Run: one((*Sidecars).CheckLimits)},
	{IDs: ids("sidecar.resources.scheduling"), Run: one((*Sidecars).CheckScheduling)},
	{IDs: ids("sidecar.readiness.gates"), Run: one((*Sidecars).CheckReadinessGates)},
	{IDs: ids("sidecar.termination.sigterm-ignored"), Run: one((*Sidecars).CheckSIGTERMIgnored)},
}

// Alone are the checks that run after the others, one at a time, in
// order, each in a phase of its own: each changes the cluster's nodes.
// The eviction check puts each kubelet under memory pressure (its
// threshold raised, then restored: the kubelet restarted twice), which
// would evict other checks' Pods - it waits until its nodes run nothing
// but the cluster's own; the last replaces the worker of the older
// kubelet the first needs.
var Alone = []Check{
	{IDs: ids("sidecar.eviction.order"), Run: one((*Sidecars).CheckEvictionOrder),
		Phase: "each kubelet under memory pressure, a native sidecar's request counted", Restarts: []string{restarts.Kubelet, restarts.Evicted}},
	{IDs: ids("sidecar.worker-replaced", "sidecar.migration.node-replaced"), Run: (*Sidecars).CheckWorkerReplaced,
		Phase: "a worker of the older kubelet replaced under a migration batch"},
}

// Promises are what the sidecar checks judge, Alone's last.
var Promises = func() []promise.ID {
	var out []promise.ID
	for _, c := range append(slices.Clone(Checks), Alone...) {
		out = append(out, c.IDs...)
	}
	return out
}()

// ChecksAtOnce is how many of Checks run at the same time. Each keeps a
// Pod or a Deployment in a namespace of its own on each kubelet and
// waits on it (a probe's period, a grace period, a Job's completion, a
// migration's settle time); run one after another they took 8 minutes of
// a certification. Together they keep two cores busy: what the CPU goes
// to is the runtime making and ending their containers (2% idle, the run
// queue at 20-77; perf: containerd, its shims and runc 40%), not their
// own work. Three at a time keeps a kubelet at a handful of Pods starting
// at once, so the timings they judge (a flush within its grace period
// plus 15 s) keep their margin; at four a controller manager once failed
// to renew its leader lease in time (its renewal's 5 s timeout) and
// exited in the middle of the phase (session 33, the host slower than
// usual that hour); that hour the phase took 260 s at four, 270 at three.
const ChecksAtOnce = 3
