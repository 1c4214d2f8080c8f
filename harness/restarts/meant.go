package restarts

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// The words a step declares what it restarts with, besides an event's
// kind (kubelet, containerd, not-ready, evicted, oom-killed) and a
// container's name (coredns).
const (
	// ControlPlane is what a rollout or a control-plane fault restarts: the
	// control plane's static Pods (kube-apiserver, kube-controller-manager,
	// kube-scheduler, etcd), a control-plane node's kubelet and Ready
	// condition, and any container whose start the kubelet's restart cut
	// short (StartError: "failed to create shim task: context canceled").
	// Not CoreDNS, kube-proxy, the CNI or containerd, and nothing of a
	// worker: a worker that leaves Ready while the control plane is rolled
	// fails cluster.nodes-stay-ready (StayReady), with its cause.
	ControlPlane = "control-plane"
	// Workloads are containers outside kube-system: a test's own Pods that
	// crash on purpose.
	Workloads = "workloads"
)

// controlPlaneContainers are the containers of the static Pods a rollout
// restarts on the node it acts on.
var controlPlaneContainers = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// CauseLostLeaderLease is the cause of a kube-controller-manager or
// kube-scheduler that exited because it could not renew its leader lease
// in time: both exit by design when they stop leading, so that two never
// act at once (cmd/kube-controller-manager/app/controllermanager.go logs
// "leaderelection lost", cmd/kube-scheduler/app/server.go "Leaderelection
// lost", then exit 1; the same in v1.35 to v1.37). While a control plane
// is being changed anywhere - an apiserver restarting, an etcd member
// replaced and its leader moving - a renewal on another node may miss its
// deadline, so such an exit is meant by a step on any node, but only
// when its own last lines say so.
const CauseLostLeaderLease = "lost-leader-lease"

// CauseRuntimeCannotFreeze is why a container's start failed when its
// runtime, runc on a cgroup v1 host, could not freeze the container's
// cgroup while setting it up ("error setting cgroup config for procHooks
// process: unable to freeze", a StartError, exit 128): the kubelet starts
// it again. It is the runtime's, on this host, not the kubelet's or the
// control plane's under test; read from the runtime's own message.
const CauseRuntimeCannotFreeze = "runtime-cannot-freeze"

// runtimeCause is the cause a container's end names in its runtime's own
// message, or "".
func runtimeCause(e Event) string {
	if e.Kind != Container {
		return ""
	}
	return RuntimeCause(e.Reason, e.Message)
}

// RuntimeCause is the cause a container's ending (its reason and message,
// as its status or the kubelet records them) names in its runtime's own
// words: CauseRuntimeCannotFreeze for a start runc could not freeze, else "".
func RuntimeCause(reason, message string) string {
	if reason == "StartError" && strings.Contains(message, "unable to freeze") {
		return CauseRuntimeCannotFreeze
	}
	return ""
}

// leaderElected are the components that exit on a lost leader lease.
var leaderElected = []string{"kube-controller-manager", "kube-scheduler"}

// Cause is what the evidence says made e happen: CauseLostLeaderLease
// when e is a leader-elected component's exit whose last lines say it
// lost its lease, else "".
func (e Event) Cause() string {
	if e.Kind != Container || e.Namespace != "kube-system" || !slices.Contains(leaderElected, e.Container) || e.ExitCode == 0 {
		return ""
	}
	for _, l := range e.Logs {
		if strings.Contains(strings.ToLower(l), "leaderelection lost") {
			return CauseLostLeaderLease
		}
	}
	return ""
}

// Span is a stretch of a run in which a step meant to restart what
// Restarts names, on Nodes when it names them (a fault or a rollout's
// step acts on one node: a restart elsewhere is not its doing, unless a
// component there lost its leader lease - CauseLostLeaderLease), else on
// any node.
type Span struct {
	Name       string
	Start, End time.Time
	Restarts   []string
	Nodes      []string
}

// covers says whether the word w names e.
func covers(w string, e Event) bool {
	switch w {
	case ControlPlane:
		switch e.Kind {
		case Kubelet, NotReady:
			return e.ControlPlaneNode
		case Container:
			static := e.Namespace == "kube-system" && slices.Contains(controlPlaneContainers, e.Container) && strings.HasPrefix(e.Pod, e.Container+"-")
			return static || e.Reason == "StartError"
		}
		return false
	case Workloads:
		return e.Kind == Container && e.Namespace != "kube-system"
	}
	// A container named is covered when it restarts, and when the kernel
	// kills it for memory.
	return w == e.Kind || ((e.Kind == Container || e.Kind == OOMKilled) && w == e.Container)
}

// Meant says of an event whether a span names it and either covers its
// time or, for a container of a Pod the span's step made, covers when the
// Pod was made: a test's own Pods may crash after the test has gone on
// (a Deployment's Pod crashing as told while its namespace is deleted).
// The control plane's static Pods are judged by time only. The kubelet
// reports times to the second, so a span starts at its second.
func Meant(spans []Span) func(Event) bool {
	within := func(t time.Time, s Span) bool {
		return !t.Before(s.Start.Truncate(time.Second)) && !t.After(s.End)
	}
	return func(e Event) bool {
		lostLease := e.Cause() == CauseLostLeaderLease
		return slices.ContainsFunc(spans, func(s Span) bool {
			during := within(e.Time, s)
			made := e.Kind == Container && !e.PodCreated.IsZero() && within(e.PodCreated, s)
			elsewhere := lostLease && slices.Contains(s.Restarts, ControlPlane)
			if len(s.Nodes) > 0 && !slices.Contains(s.Nodes, e.Node) && !elsewhere {
				return false
			}
			return slices.ContainsFunc(s.Restarts, func(w string) bool {
				return covers(w, e) && (during || (made && w != ControlPlane))
			})
		})
	}
}

// Check judges cluster.no-unexpected-restarts on the events a run saw:
// each one meant is evidence, any other fails the promise, named with its
// node, time, exit code and last log lines. A node leaving Ready is
// StayReady's to judge.
func Check(seen []Event, meant func(Event) bool) promise.Verdict {
	const id = "cluster.no-unexpected-restarts"
	var expected, unexpected, causes []string
	for _, e := range seen {
		if e.Kind == NotReady {
			continue
		}
		if meant(e) {
			line := "meant: " + e.String()
			if c := e.Cause(); c != "" {
				line += "; cause " + c + ", its last lines: " + strings.Join(e.Logs, " | ")
			}
			expected = append(expected, line)
			continue
		}
		line := e.String()
		if len(e.Logs) > 0 {
			line += "; last lines: " + strings.Join(e.Logs, " | ")
		}
		if len(e.Kubelet) > 0 {
			line += "; the kubelet on the Pod: " + strings.Join(e.Kubelet, " | ")
		}
		cause := runtimeCause(e)
		if cause == "" {
			cause = promise.UnknownCause
		}
		if !slices.Contains(causes, cause) {
			causes = append(causes, cause)
		}
		unexpected = append(unexpected, line)
	}
	if len(unexpected) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Causes: causes, Evidence: append(unexpected, expected...),
			Reason: fmt.Sprintf("%d restart(s), crash(es) or eviction(s) no step meant, first: %s", len(unexpected), unexpected[0])}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass,
		Evidence: append([]string{fmt.Sprintf("%d event(s) seen, each meant by the step under way", len(expected))}, expected...)}
}

// Judge stops the monitor and judges the two promises of a whole run on
// what it saw: cluster.no-unexpected-restarts (Check) and
// cluster.nodes-stay-ready (StayReady, which reads the audit logs at
// auditLogs for a node's cause). Where it could not look (a node's
// journal it could not follow) makes the first an error (withGaps).
func (m *Monitor) Judge(meant func(Event) bool, auditLogs []string) []promise.Verdict {
	seen := m.Stop()
	return []promise.Verdict{withGaps(Check(seen, meant), m.Gaps()), StayReady(seen, meant, auditLogs)}
}

// withGaps is v, judged where the monitor could look, with where it could
// not (gaps): said in its evidence, and a pass there is an error - a
// kubelet or containerd restart on a node whose journal was not followed
// would not have been seen. A failure stays one: what was seen happened.
func withGaps(v promise.Verdict, gaps []string) promise.Verdict {
	for _, gap := range gaps {
		v.Evidence = append(v.Evidence, "not watched: "+gap)
	}
	if len(gaps) > 0 && v.Outcome == promise.Pass {
		v.Outcome, v.Reason = promise.Error, "the monitor could not watch every node: "+strings.Join(gaps, "; ")
	}
	return v
}
