package certification

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/sidecarchecks"
)

// A phase meant to crash a check's sidecar covers that container's
// restarts, not the control plane's; a rollout's phase the reverse.
func TestMeantByWhatEachPhaseSays(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	phases := []report.Phase{
		{Name: "roll", Start: t0, End: t0.Add(time.Minute)},
		{Name: "sidecars", Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute)},
	}
	meant := Meant(phases, map[string]*Meaning{"roll": {Words: []string{restarts.ControlPlane}}, "sidecars": {Words: []string{sidecarchecks.CrashingSidecar}}})
	apiserver := restarts.Event{Kind: restarts.Container, Namespace: "kube-system", Container: "kube-apiserver", Pod: "kube-apiserver-cp1"}
	proxy := restarts.Event{Kind: restarts.Container, Namespace: "skewer-sidecar-1", Container: sidecarchecks.CrashingSidecar, Pod: "crash"}
	for _, c := range []struct {
		e    restarts.Event
		at   time.Duration
		want bool
	}{
		{apiserver, 30 * time.Second, true},
		{apiserver, 90 * time.Second, false},
		{proxy, 90 * time.Second, true},
		{proxy, 30 * time.Second, false},
		{proxy, 3 * time.Minute, false},
	} {
		c.e.Time = t0.Add(c.at)
		if got := meant(c.e); got != c.want {
			t.Errorf("%s %s at +%s: meant %v, want %v", c.e.Namespace, c.e.Container, c.at, got, c.want)
		}
	}
}

// A fault acts on one node: it means the restarts of that node's control
// plane, and an apiserver crashing on another node in the same minute
// fails cluster.no-unexpected-restarts.
func TestAFaultMeansItsNodeOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	phases := []report.Phase{{Name: "fault: cp4 killed", Start: t0, End: t0.Add(time.Minute)}, {Name: "the link black-holed", Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute)}}
	meant := Meant(phases, map[string]*Meaning{"fault: cp4 killed": {Words: []string{restarts.ControlPlane}, Nodes: []string{"cp4"}}})
	on := func(node string, at time.Duration) restarts.Event {
		return restarts.Event{Kind: restarts.Container, Namespace: "kube-system", Container: "kube-apiserver", Pod: "kube-apiserver-" + node, Node: node,
			ControlPlaneNode: true, Time: t0.Add(at), ExitCode: 137}
	}
	if !meant(on("cp4", 30*time.Second)) {
		t.Error("the killed node's apiserver restarting is not meant by its fault")
	}
	for _, e := range []restarts.Event{on("cp2", 30*time.Second), on("cp4", 90*time.Second)} {
		if meant(e) {
			t.Errorf("%s's apiserver at %s meant", e.Node, e.Time.Format("15:04:05"))
		}
	}
	v := restarts.Check([]restarts.Event{on("cp4", 30*time.Second), on("cp2", 31*time.Second)}, meant)
	if v.Outcome != promise.Fail || !strings.Contains(v.Reason, "cp2") {
		t.Errorf("an apiserver crash on a node the fault does not touch: %s %q", v.Outcome, v.Reason)
	}
}

// A rollout's step means the restarts of the node it acts on, while it
// runs: an apiserver crashing on another node during it, or on its node
// between its steps, is unexpected. A step on the whole cluster means
// them on any node. A controller-manager elsewhere that lost its leader
// lease is meant only when its own last lines say so.
func TestARolloutStepMeansItsNodeOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	roll := &rollout.Runner{Steps: []rollout.Step{
		{Name: "stop cp1's apiserver", Node: "cp1", Start: at(0), Duration: 20 * time.Second},
		{Name: "upgrade cp1", Node: "cp1", Start: at(21), Duration: 39 * time.Second},
		{Name: "upgrade cp2", Node: "cp2", Start: at(61), Duration: 99 * time.Second},
		{Name: "set ClusterConfiguration", Start: at(170), Duration: 10 * time.Second},
	}}
	phases := []report.Phase{{Name: "roll", Start: at(-30), End: at(200)}}
	meant := Meant(phases, map[string]*Meaning{"roll": {Words: []string{restarts.ControlPlane}, Rollouts: []*rollout.Runner{roll}}})
	ev := func(container, node string, s int, logs ...string) restarts.Event {
		return restarts.Event{Kind: restarts.Container, Namespace: "kube-system", Container: container, Pod: container + "-" + node, Node: node,
			ControlPlaneNode: true, Time: at(s), ExitCode: 1, Logs: logs}
	}
	lost := `E1204 10:01:30.1 1 controllermanager.go:368] "leaderelection lost"`
	for _, c := range []struct {
		e    restarts.Event
		want bool
	}{
		{ev("kube-apiserver", "cp1", 30), true},
		{ev("kube-apiserver", "cp1", 20), true},   // stopped at the end of a step, its exit recorded between two
		{ev("kube-apiserver", "cp2", 30), false},  // another node, during cp1's steps
		{ev("kube-apiserver", "cp1", 120), false}, // its node, during cp2's step
		{ev("kube-apiserver", "cp2", 165), true},  // the step until the next begins
		{ev("kube-apiserver", "cp3", 175), true},  // a step on the whole cluster
		{ev("kube-apiserver", "cp3", 185), false}, // after the last step
		{ev("kube-apiserver", "cp2", -10), false}, // the phase, before its rollout
		{ev("kube-controller-manager", "cp3", 30, "I1204 ...", lost), true},
		{ev("kube-scheduler", "cp3", 130, `E1204 server.go:314] "Leaderelection lost"`), true},
		{ev("kube-controller-manager", "cp3", 30, "I1204 something else"), false},
		{ev("kube-apiserver", "cp3", 30, lost), false},           // only a leader-elected component
		{ev("kube-controller-manager", "cp3", 190, lost), false}, // no step under way
	} {
		if got := meant(c.e); got != c.want {
			t.Errorf("%s on %s at +%s (logs %q): meant %v, want %v", c.e.Container, c.e.Node, c.e.Time.Sub(t0), c.e.Logs, got, c.want)
		}
	}
	v := restarts.Check([]restarts.Event{ev("kube-controller-manager", "cp3", 30, lost)}, meant)
	if v.Outcome != promise.Pass || !strings.Contains(strings.Join(v.Evidence, " "), "cause lost-leader-lease") {
		t.Errorf("a lost leader lease elsewhere, in the evidence: %s %v", v.Outcome, v.Evidence)
	}
}

func TestKeptFamilies(t *testing.T) {
	for name, want := range map[string]bool{
		"apiserver_peer_proxy_errors_total": true, "apiserver_rerouted_request_total": true, "kubernetes_feature_enabled": true,
		"apiserver_request_total": true, "apiserver_request_duration_seconds": false, "apiserver_request_total_extra": false,
		"go_goroutines": false,
	} {
		if keptFamily(name) != want {
			t.Errorf("keptFamily(%s) = %v", name, !want)
		}
	}
}

// A container start the runtime failed for want of a frozen cgroup (runc
// on cgroup v1, a certification's own run: the sidecar check's app on the
// old worker) fails cluster.no-unexpected-restarts with that cause, read
// from the runtime's message, and the repository's waiver covers it; an
// unmeant restart of any other kind beside it keeps the failure.
func TestRuntimeCannotFreezeIsWaivedAlone(t *testing.T) {
	freeze := restarts.Event{Kind: restarts.Container, Time: t0(), Node: "w1", Namespace: "skewer-sidecar-10338-4", Pod: "terminate", Container: "app",
		ExitCode: 128, Reason: "StartError", Message: "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting cgroup config for procHooks process: unable to freeze"}
	never := func(restarts.Event) bool { return false }
	ws := upstreamWaivers(t)
	v := restarts.Check([]restarts.Event{freeze}, never)
	if v.Outcome != promise.Fail || len(v.Causes) != 1 || v.Causes[0] != restarts.CauseRuntimeCannotFreeze {
		t.Fatalf("the runtime's freeze failure: %s, causes %v", v.Outcome, v.Causes)
	}
	if w := ws.Apply(v, false); w.Outcome != promise.Waived || !strings.Contains(w.Reference, "opencontainers/runc") {
		t.Errorf("waived: %s %s", w.Outcome, w.Reason)
	}
	if w := ws.Apply(v, true); w.Outcome != promise.Fail {
		t.Errorf("--strict: %s", w.Outcome)
	}
	crash := freeze
	crash.Reason, crash.ExitCode, crash.Message = "Error", 2, ""
	for name, seen := range map[string][]restarts.Event{"a crash beside it": {freeze, crash}, "another StartError": {{Kind: restarts.Container, Time: t0(), Node: "w1", Namespace: "ns", Pod: "p", Container: "c",
		ExitCode: 128, Reason: "StartError", Message: "exec: \"/app\": permission denied"}}} {
		if w := ws.Apply(restarts.Check(seen, never), false); w.Outcome != promise.Fail {
			t.Errorf("%s: %s, want the failure kept", name, w.Outcome)
		}
	}
}

// The canary's native template restarting more than the legacy one is
// waived only when each restart beyond was a start runc could not freeze
// (read from the Pods' statuses); one restart more that was not keeps
// the failure, and so does --strict.
func TestCanaryRuntimeRestartsWaived(t *testing.T) {
	ws := upstreamWaivers(t)
	judge := func(restarted, runc int32) promise.Verdict {
		sec := []time.Duration{2 * time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}
		legacy := sidecarchecks.TemplateSeen{Ready: sec, Requests: 160, Written: 2400, MemoryPeak: []int64{30 << 20, 30 << 20, 30 << 20, 30 << 20}, CPU: sec, JobsUnfinished: 2}
		native := legacy
		native.Jobs, native.JobsUnfinished, native.Restarts, native.RuntimeRestarts = sec[:2], 0, restarted, runc
		seen := sidecarchecks.CanarySeen{Nodes: []string{"w1", "cp1"}, Pods: 4, Templates: [2]sidecarchecks.TemplateSeen{legacy, native}, ReadinessLooks: sidecarchecks.Looks{Tried: 120, Seen: 120}}
		return sidecarchecks.JudgeCanary(seen, sidecarchecks.CompareCanary(seen))
	}
	if w := ws.Apply(judge(1, 1), false); w.Outcome != promise.Waived || !strings.Contains(w.Reference, "opencontainers/runc") {
		t.Errorf("a start runc failed: %s %s", w.Outcome, w.Reason)
	}
	if w := ws.Apply(judge(1, 1), true); w.Outcome != promise.Fail {
		t.Errorf("--strict: %s", w.Outcome)
	}
	if w := ws.Apply(judge(2, 1), false); w.Outcome != promise.Fail {
		t.Errorf("a crash beside it: %s, want the failure kept", w.Outcome)
	}
}
