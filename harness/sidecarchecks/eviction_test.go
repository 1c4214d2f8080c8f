package sidecarchecks

import (
	"strings"
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
	cases := []struct {
		name    string
		change  func(*EvictionSeen)
		outcome promise.Outcome
		reason  string
	}{
		{"the covered Pod went first", func(s *EvictionSeen) { s.First = "covered" }, promise.Fail, "its native sidecar's request was not counted"},
		{"the covered Pod went second", func(s *EvictionSeen) { s.CoveredEvicted = true }, promise.Fail, "evicted the covered Pod too"},
		{"the covered Pod never used its sidecar's share", func(s *EvictionSeen) { s.CoveredUsage = 10 << 20 }, promise.Error, "never seen using more than its app's request"},
		{"another Pod went first", func(s *EvictionSeen) { s.First = "kube-system/coredns-1" }, promise.Error, "not one of the check's two Pods"},
		{"nothing seen", func(s *EvictionSeen) { *s = EvictionSeen{} }, promise.Error, "never seen"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := evictedInOrder()
			c.change(&seen)
			v := JudgeEvictionOrder(testKubelets, map[string]EvictionSeen{"w1": evictedInOrder(), "cp1": seen})
			if v.Outcome != c.outcome || !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("got %s %q, want %s with %q", v.Outcome, v.Reason, c.outcome, c.reason)
			}
		})
	}
}
