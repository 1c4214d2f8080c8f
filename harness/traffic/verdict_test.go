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
	clean := Summary{Requests: 500, Acked: 200, NewAPIProbed: true, NewAPIChecked: 150}
	for id, o := range outcomes(clean.Verdicts()) {
		if o != promise.Pass {
			t.Errorf("clean traffic: %s %s", id, o)
		}
	}

	bad := Summary{Requests: 500, Acked: 200, NewAPIProbed: true, NewAPIChecked: 150, LostWrites: []string{"w-1", "w-2"}, FalseNotFound: 1,
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

	// Requests made, but too few writes acknowledged, or too few answers
	// for the newer-only collection through a target advertising it, to
	// show none lost or none a false 404: errors, never a pass.
	for name, s := range map[string]Summary{
		"no write acknowledged":      {Requests: 500, NewAPIProbed: true, NewAPIChecked: 150},
		"the collection never asked": {Requests: 500, Acked: 200, NewAPIProbed: true, NewAPIChecked: 99},
	} {
		got := outcomes(s.Verdicts())
		acked := s.Acked >= MinRequests
		if (got["rollout.no-lost-writes"] == promise.Pass) != acked || (got["rollout.no-missed-watch-events"] == promise.Pass) != acked ||
			(got["rollout.no-false-404"] == promise.Pass) != (s.NewAPIChecked >= MinRequests) {
			t.Errorf("%s: %v", name, got)
		}
		for id, o := range got {
			if o != promise.Pass && o != promise.Error {
				t.Errorf("%s: %s %s, want pass or error", name, id, o)
			}
		}
	}
	// A false 404 fails however few were checked.
	few := bad
	few.NewAPIChecked = 3
	if got := outcomes(few.Verdicts()); got["rollout.no-false-404"] != promise.Fail {
		t.Errorf("a false 404 among 3: %s", got["rollout.no-false-404"])
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
