package traffic

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

func TestVerdicts(t *testing.T) {
	outcomes := func(vs []promise.Verdict) map[promise.ID]promise.Outcome {
		out := map[promise.ID]promise.Outcome{}
		for _, v := range vs {
			if err := v.Validate(); err != nil {
				t.Errorf("invalid verdict: %v", err)
			}
			out[v.ID] = v.Outcome
		}
		return out
	}
	clean := Summary{Requests: 500, NewAPIProbed: true}
	for id, o := range outcomes(clean.Verdicts()) {
		if o != promise.Pass {
			t.Errorf("clean traffic: %s %s", id, o)
		}
	}

	bad := Summary{Requests: 500, NewAPIProbed: true, LostWrites: []string{"w-1", "w-2"}, FalseNotFound: 1,
		FalseNotFoundRecords: []Record{{Time: time.Unix(0, 0), Verb: "list", Object: "mutatingadmissionpolicies", Target: "lb", Server: "v1.35.4", Phase: "drain x"}}}
	vs := bad.Verdicts()
	got := outcomes(vs)
	want := map[promise.ID]promise.Outcome{"rollout.no-lost-writes": promise.Fail, "rollout.no-missed-watch-events": promise.Pass, "rollout.no-false-404": promise.Fail}
	for id, o := range want {
		if got[id] != o {
			t.Errorf("%s: got %s, want %s", id, got[id], o)
		}
	}
	for _, v := range vs {
		if v.ID == "rollout.no-lost-writes" && !strings.Contains(v.Reason, "2 acknowledged write(s)") {
			t.Errorf("reason does not count the lost writes: %q", v.Reason)
		}
		if v.ID == "rollout.no-false-404" && !strings.Contains(v.Reason, `via lb (audit ID none, phase "drain x"), in no audit log`) {
			t.Errorf("reason does not show the request: %q", v.Reason)
		}
	}

	// Without a probe of a newer-only collection, no 404 can be judged:
	// the check could not run, an error, never a skip.
	for _, v := range (Summary{Requests: 500}).Verdicts() {
		if v.ID == "rollout.no-false-404" && v.Outcome != promise.Error {
			t.Errorf("no new-API probe: %s %s, want error", v.ID, v.Outcome)
		}
	}

	// Too little traffic proves nothing: every promise fails.
	for id, o := range outcomes(Summary{Requests: 3}.Verdicts()) {
		if o != promise.Fail {
			t.Errorf("3 requests: %s %s, want fail", id, o)
		}
	}
}

// No traffic at all is below every floor: each promise the summary and
// the disruption table carry fails, none passes on an empty sample.
func TestEmptyTrafficFails(t *testing.T) {
	for _, v := range (Summary{NewAPIProbed: true}).Verdicts() {
		if v.Outcome != promise.Fail || !strings.Contains(v.Reason, "made 0 requests, fewer than the 100") {
			t.Errorf("no traffic: %s %s: %s", v.ID, v.Outcome, v.Reason)
		}
	}
	v := DisruptionVerdict(nil, promise.Budget{MaxFailed: 0.01})
	if v.Outcome != promise.Fail || v.Reason != "no request went through the load balancer on reused connections; no request went through the load balancer on new connections" {
		t.Errorf("an empty disruption table: %+v", v)
	}
}
