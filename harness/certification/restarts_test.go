package certification

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
)

// A control-plane component restarting while a rollout acts is meant;
// the same outside a rollout, or anything else at any time, fails.
func TestCheckRestarts(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	rolling := []report.Phase{{Name: "roll every control plane", Start: at.Add(-time.Minute), End: at.Add(time.Minute)}}
	r := func(pod, container, phase string) restarts.Restart {
		t := at
		if phase != "roll every control plane" {
			t = at.Add(2 * time.Minute) // after the rollout's span
		}
		return restarts.Restart{Time: t, Phase: phase, Node: "cp1", Namespace: "kube-system", Pod: pod, Container: container,
			Count: 1, ExitCode: 1, Reason: "Error", Logs: []string{"leaderelection lost"}}
	}
	// Seen in an in-place run: the kubelet restarted by the rollout
	// while it started kube-proxy's new container.
	startError := func(r restarts.Restart) restarts.Restart {
		r.ExitCode, r.Reason, r.Logs = 128, "StartError", nil
		return r
	}
	meant := RolloutMeant(rolling)
	for _, tc := range []struct {
		r    restarts.Restart
		want bool
	}{
		{r("kube-controller-manager-cp1", "kube-controller-manager", "roll every control plane"), true},
		{r("etcd-cp1", "etcd", "roll every control plane"), true},
		{r("kube-controller-manager-cp1", "kube-controller-manager", "judge the traffic"), false},
		{r("coredns-7d8f", "coredns", "roll every control plane"), false},
		{r("kube-scheduler-lookalike", "kube-controller-manager", "roll every control plane"), false},
		{startError(r("kube-proxy-x99rf", "kube-proxy", "roll every control plane")), true},
		{startError(r("kube-proxy-x99rf", "kube-proxy", "judge the traffic")), false},
	} {
		if got := meant(tc.r); got != tc.want {
			t.Errorf("%s: meant %v, want %v", tc.r, got, tc.want)
		}
	}
	if v := CheckRestarts(nil, meant); v.Outcome != certify.Pass {
		t.Errorf("no restart: %+v", v)
	}
	v := CheckRestarts([]restarts.Restart{r("etcd-cp1", "etcd", "roll every control plane"), r("coredns-7d8f", "coredns", "judge the traffic")}, meant)
	if v.Outcome != certify.Fail || !strings.Contains(v.Reason, "1 container restart(s) no step meant, first: 2026-12-01T14:02:00Z kube-system/coredns-7d8f container coredns on cp1") ||
		!strings.Contains(v.Evidence[0], "last lines: leaderelection lost") || !strings.HasPrefix(v.Evidence[1], "meant: ") {
		t.Errorf("one meant, one not: %+v", v)
	}
	if err := v.Validate(); err != nil {
		t.Error(err)
	}
}
