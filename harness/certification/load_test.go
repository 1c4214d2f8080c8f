package certification

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// aBurst is a burst that met everything: 300 forwarded lists through two
// older entries taking fwd, 150 local ones at the newer server taking
// 30 ms, 200 own reads taking own, and only the older entries' rerouted
// counters moved.
func aBurst(fwd, own time.Duration) *Load {
	l := &Load{Rerouted: map[string]float64{"cp1": 150, "cp2": 150, "cp5": 0}, Newer: []string{"cp5"}}
	for i := range 300 {
		l.Burst = append(l.Burst, answer{[]string{"cp1", "cp2"}[i%2], true, Attempt{Code: 200, Took: fwd}})
	}
	for range 150 {
		l.Burst = append(l.Burst, answer{"cp5", false, Attempt{Code: 200, Took: 30 * time.Millisecond}})
	}
	for i := range 200 {
		l.Own = append(l.Own, answer{[]string{"cp1", "cp2"}[i%2], false, Attempt{Code: 200, Took: own}})
	}
	return l
}

func TestJudgeLoad(t *testing.T) {
	v := judgeLoad(aBurst(80*time.Millisecond, 20*time.Millisecond), promise.DefaultGuard)
	if v.Outcome != promise.Pass || !strings.Contains(v.Evidence[0], "300 forwarded lists, 0 failed") || !strings.Contains(v.Evidence[0], "+50ms (at most +1s)") {
		t.Errorf("a burst within the objective: %s %v (%s)", v.Outcome, v.Evidence, v.Reason)
	}
	failing := aBurst(80*time.Millisecond, 20*time.Millisecond)
	for i := range 6 {
		failing.Burst[i].Code = 503
	}
	throttled := aBurst(80*time.Millisecond, 20*time.Millisecond)
	for i := range 250 {
		throttled.Burst[i].Code = 429
	}
	notRouted := aBurst(80*time.Millisecond, 20*time.Millisecond)
	for i := range 300 {
		notRouted.Burst[i].Code = 404
	}
	harmed := aBurst(80*time.Millisecond, 20*time.Millisecond)
	harmed.Own[3].Code = 0
	looped := aBurst(80*time.Millisecond, 20*time.Millisecond)
	looped.Rerouted["cp5"] = 3
	for what, tc := range map[string]struct {
		l    *Load
		want promise.Outcome
	}{
		"2% of forwarded lists failed":  {failing, promise.Fail},
		"forwarding added 1.2 s at p99": {aBurst(1250*time.Millisecond, 20*time.Millisecond), promise.Fail},
		"forwarded lists answered 404":  {notRouted, promise.Fail},
		"an own read went unanswered":   {harmed, promise.Fail},
		"own reads slowed past 1 s":     {aBurst(80*time.Millisecond, 1100*time.Millisecond), promise.Fail},
		"the newer server forwarded":    {looped, promise.Fail},
		"most lists throttled: too few": {throttled, promise.Error},
		"no own reads":                  {&Load{Burst: aBurst(0, 0).Burst, Rerouted: map[string]float64{}}, promise.Error},
	} {
		if v := judgeLoad(tc.l, promise.DefaultGuard); v.Outcome != tc.want {
			t.Errorf("%s: %s (%s), want %s", what, v.Outcome, v.Reason, tc.want)
		}
	}
}
