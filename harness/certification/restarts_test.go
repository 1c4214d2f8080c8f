package certification

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
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
	meant := Meant(phases, map[string][]string{"roll": {restarts.ControlPlane}, "sidecars": {sidecarchecks.CrashingSidecar}}, nil)
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
	meant := Meant(phases, map[string][]string{"fault: cp4 killed": {restarts.ControlPlane}}, map[string][]string{"fault: cp4 killed": {"cp4"}})
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
	if v.Outcome != certify.Fail || !strings.Contains(v.Reason, "cp2") {
		t.Errorf("an apiserver crash on a node the fault does not touch: %s %q", v.Outcome, v.Reason)
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
