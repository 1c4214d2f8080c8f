package sidecarchecks

import (
	"testing"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// evictedInOrder is a node's pressure as the promise wants it.
func evictedInOrder() EvictionSeen {
	return EvictionSeen{First: "greedy", Message: "The node was low on resource: memory.", CoveredUsage: 505 << 20,
		CoveredRequest: evictionAppRequest + coveredSidecarRequest, AppRequest: evictionAppRequest}
}

func TestEvictionOrderJudged(t *testing.T) {
	if v := JudgeEvictionOrder(testKubelets, onBoth(evictedInOrder())); v.Outcome != promise.Pass {
		t.Fatalf("in order: %s %q", v.Outcome, v.Reason)
	}
	judgeEachCase(t, evictedInOrder, JudgeEvictionOrder, []seenCase[EvictionSeen]{
		{"the covered Pod went first", func(s *EvictionSeen) { s.First = "covered" }, promise.Fail, "its native sidecar's request was not counted"},
		{"the covered Pod went second", func(s *EvictionSeen) { s.CoveredEvicted = true }, promise.Fail, "evicted the covered Pod too"},
		{"the covered Pod never used its sidecar's share", func(s *EvictionSeen) { s.CoveredUsage = 10 << 20 }, promise.Error, "never seen using more than its app's request"},
		{"another Pod went first", func(s *EvictionSeen) { s.First = "kube-system/coredns-1" }, promise.Error, "not one of the check's two Pods"},
		{"nothing seen", func(s *EvictionSeen) { *s = EvictionSeen{} }, promise.Error, "never seen"},
	})
}
