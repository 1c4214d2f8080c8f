package certification

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
)

// controlPlaneContainers are the containers of the static Pods a rollout
// restarts on the node it acts on.
var controlPlaneContainers = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// RolloutMeant says whether a rollout meant r, whose previous instance
// ended while a rollout acted (within one of rolling, the spans of the
// phases a rollout acted in): a control-plane static Pod's container, or
// any container that failed to start (StartError) - a rollout restarts
// each node's kubelet, and a container the kubelet was starting then has
// its start cancelled ("failed to create shim task: context canceled")
// and is started again. Anything else - CoreDNS, kube-proxy, the CNI, a
// fixture that ran and exited, or a control-plane component while no
// rollout acts - nothing meant.
func RolloutMeant(rolling []report.Phase) func(restarts.Restart) bool {
	return func(r restarts.Restart) bool {
		controlPlane := r.Namespace == "kube-system" && slices.Contains(controlPlaneContainers, r.Container) && strings.HasPrefix(r.Pod, r.Container+"-")
		if !controlPlane && r.Reason != "StartError" {
			return false
		}
		return slices.ContainsFunc(rolling, func(p report.Phase) bool {
			return !r.Time.Before(p.Start) && !r.Time.After(p.End)
		})
	}
}

// CheckRestarts judges cluster.no-unexpected-restarts on the restarts a
// run saw: each one meant (as expected says) is evidence, any other fails
// the promise, named with its node, time, exit code and last log lines.
func CheckRestarts(seen []restarts.Restart, expected func(restarts.Restart) bool) certify.Verdict {
	const id = "cluster.no-unexpected-restarts"
	var meant, unexpected []string
	for _, r := range seen {
		if expected(r) {
			meant = append(meant, "meant: "+r.String())
			continue
		}
		line := r.String()
		if len(r.Logs) > 0 {
			line += "; last lines: " + strings.Join(r.Logs, " | ")
		}
		unexpected = append(unexpected, line)
	}
	if len(unexpected) > 0 {
		return certify.Verdict{ID: id, Outcome: certify.Fail, Evidence: append(unexpected, meant...),
			Reason: fmt.Sprintf("%d container restart(s) no step meant, first: %s", len(unexpected), unexpected[0])}
	}
	return certify.Verdict{ID: id, Outcome: certify.Pass,
		Evidence: append([]string{fmt.Sprintf("%d restart(s) seen, each meant by a rollout acting (a control-plane component, or a start its kubelet restart cut short)", len(meant))}, meant...)}
}
