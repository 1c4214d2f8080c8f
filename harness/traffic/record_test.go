package traffic

import (
	"strings"
	"testing"
	"time"
)

func TestSummarizeCountsPerPhase(t *testing.T) {
	ms := time.Millisecond
	recs := []Record{
		{Phase: "before", Target: "lb", Code: 201, Latency: 10 * ms, Probe: "write"},
		{Phase: "before", Target: "lb", Code: 404, Latency: 5 * ms, Probe: "new-api"},
		{Phase: "join", Target: "cp1", Code: 0, Probe: "write"},
		{Phase: "join", Target: "cp1", Code: 503, Latency: 30 * ms, Probe: "write"},
		{Phase: "join", Target: "cp2", Code: 404, Latency: 20 * ms, Probe: "new-api"},
		{Phase: "join", Target: "cp2", Code: 200, Latency: 40 * ms, Probe: "new-api"},
		// cp3 had not yet advertised the new API: its 404 is not false.
		{Phase: "join", Target: "cp3", Code: 404, Latency: 20 * ms, Probe: "new-api"},
	}
	got := Summarize(recs, func(phase, target string) bool { return phase == "join" && target != "cp3" })
	if len(got) != 2 || got[0].Phase != "before" || got[1].Phase != "join" {
		t.Fatalf("phases = %+v, want before then join", got)
	}
	if got[0].FalseNotFound != 0 {
		t.Error("a 404 while no apiserver advertises the API is not false")
	}
	j := got[1]
	if j.Requests != 5 || j.NoResponse != 1 || j.ServerErrors != 1 || j.FalseNotFound != 1 {
		t.Errorf("join = %+v", j)
	}
	if j.P50 != 20*ms || j.P99 != 30*ms {
		t.Errorf("join latencies p50 %s p99 %s, want 20ms and 30ms (responses only)", j.P50, j.P99)
	}
	if j.CodesByTarget["cp1"][0] != 1 || j.CodesByTarget["cp2"][200] != 1 {
		t.Errorf("codes by target = %v", j.CodesByTarget)
	}
	s := Summary{Requests: len(recs), Phases: got, LostWrites: []string{"w-1"}}
	if out := s.String(); !strings.Contains(out, "acknowledged writes lost 1") || !strings.Contains(out, "join") {
		t.Errorf("summary text:\n%s", out)
	}
}
