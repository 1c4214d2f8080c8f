package sidecarchecks

import (
	"context"
	"slices"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// A Check is one of the sidecar checks: the promises it judges, whether
// it crashes CrashingSidecar on purpose, and how it runs.
type Check struct {
	IDs     []promise.ID
	Crashes bool
	Run     func(*Sidecars, context.Context) []promise.Verdict
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
	{ids("sidecar.migration.batches", "sidecar.migration.rollback"), true, (*Sidecars).CheckMigration},
	{ids("sidecar.migration.stop-conditions"), true, one((*Sidecars).CheckStopConditions)},
	{ids("sidecar.canary.compared"), false, one((*Sidecars).CheckCanary)},
	{ids("sidecar.termination.reverse-order", "sidecar.termination.bounded-flush"), false, (*Sidecars).CheckTermination},
	{ids("sidecar.stripped.preflight", "sidecar.stripped.shapes"), true, (*Sidecars).CheckStripped},
	{ids("sidecar.job.completes"), false, one((*Sidecars).CheckJobs)},
	{ids("sidecar.job.sidecar-crashes"), false, one((*Sidecars).CheckJobSidecarCrashes)},
	{ids("sidecar.stripped.old-client"), true, one((*Sidecars).CheckOldClient)},
	{ids("sidecar.resources.formula", "sidecar.resources.quota-admission"), false, (*Sidecars).CheckResources},
	{ids("sidecar.hung.out-of-service"), true, one((*Sidecars).CheckHungHelper)},
	{ids("sidecar.failure.closed"), true, one((*Sidecars).CheckFailClosed)},
	{ids("sidecar.failure.open"), true, one((*Sidecars).CheckFailOpen)},
	{ids("sidecar.least-privilege"), false, one((*Sidecars).CheckLeastPrivilege)},
	{ids("sidecar.network-policy"), false, one((*Sidecars).CheckNetworkPolicy)},
	{ids("sidecar.start.order"), false, one((*Sidecars).CheckStartOrder)},
	{ids("sidecar.crash.restarts-alone"), false, one((*Sidecars).CheckCrashAlone)},
	{ids("sidecar.oom.restarts-alone"), true, one((*Sidecars).CheckOOMAlone)},
	{ids("sidecar.resources.limits-qos"), false, one((*Sidecars).CheckLimits)},
	{ids("sidecar.resources.scheduling"), false, one((*Sidecars).CheckScheduling)},
	{ids("sidecar.readiness.gates"), false, one((*Sidecars).CheckReadinessGates)},
	{ids("sidecar.termination.sigterm-ignored"), false, one((*Sidecars).CheckSIGTERMIgnored)},
}

// Alone is the check that runs after the others, by itself: it changes
// the cluster's nodes (a worker replaced).
var Alone = Check{IDs: ids("sidecar.worker-replaced", "sidecar.migration.node-replaced"), Run: (*Sidecars).CheckWorkerReplaced}

// Promises are what the sidecar checks judge, Alone's last.
var Promises = func() []promise.ID {
	var out []promise.ID
	for _, c := range append(slices.Clone(Checks), Alone) {
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
