package certification

import (
	"errors"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/promise"
)

func TestKubeletAccessJudged(t *testing.T) {
	ok := []KubeletRead{{APIServer: "cp1", Node: "w1", Pod: "p1"}, {APIServer: "cp1", Node: "cp1", Pod: "p2"},
		{APIServer: "cp4", Node: "w1", Pod: "p1"}, {APIServer: "cp4", Node: "cp1", Pod: "p2"}}
	if v := JudgeKubeletAccess("the rollout", ok); v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "each of 2 apiservers read a Pod's log on each of 2 nodes") {
		t.Errorf("all read: %s %q %v", v.Outcome, v.Reason, v.Evidence)
	}
	denied := append([]KubeletRead(nil), ok...)
	denied[2].Err = errors.New("Forbidden")
	if v := JudgeKubeletAccess("the rollout", denied); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "1 of 4 reads") || !strings.Contains(v.Reason, "through cp4's apiserver, the log of p1 on w1: Forbidden") {
		t.Errorf("one denied: %s %q", v.Outcome, v.Reason)
	}
	if v := JudgeKubeletAccess("the rollout", nil); v.Outcome != promise.Error {
		t.Errorf("nothing read: %s %q", v.Outcome, v.Reason)
	}
}
