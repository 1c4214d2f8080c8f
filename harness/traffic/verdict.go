package traffic

import (
	"fmt"
	"strings"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// MinRequests is how many requests a run of traffic must have made before
// its summary can prove anything: fewer, and every promise it carries fails.
const MinRequests = 100

// Verdicts holds the summary to the rollout promises it carries: no
// acknowledged write lost, no watch event missed, no false 404, no 403
// through the load balancer. Each
// failure names what it saw, with the first objects or requests as
// evidence.
func (s Summary) Verdicts() []promise.Verdict {
	if s.Requests < MinRequests {
		reason := fmt.Sprintf("the traffic made %d requests, fewer than the %d a verdict needs", s.Requests, MinRequests)
		return []promise.Verdict{
			{ID: "rollout.no-lost-writes", Outcome: promise.Fail, Reason: reason},
			{ID: "rollout.no-missed-watch-events", Outcome: promise.Fail, Reason: reason},
			{ID: "rollout.no-false-404", Outcome: promise.Fail, Reason: reason},
			{ID: "rollout.no-false-403", Outcome: promise.Fail, Reason: reason},
		}
	}
	explained := s.NotFound
	if len(explained) != len(s.FalseNotFoundRecords) { // not looked up
		explained = nil
		for _, r := range s.FalseNotFoundRecords {
			explained = append(explained, NotFound{Record: r, Cause: promise.UnknownCause})
		}
	}
	var false404, causes []string
	for _, n := range explained {
		false404 = append(false404, n.String())
		causes = append(causes, n.Cause)
	}
	noFalse404 := countVerdict("rollout.no-false-404", false404, "404(s) for a resource an apiserver in the cluster served", s.Requests)
	noFalse404.Causes = causes
	switch {
	case !s.NewAPIProbed:
		noFalse404 = promise.Errored("rollout.no-false-404",
			"the traffic asked for no collection only the newer version serves: none was given or found by comparing the apiservers' discovery at each step")
	case s.NewAPIChecked < MinRequests && len(false404) == 0:
		noFalse404 = promise.Errored("rollout.no-false-404",
			"%d requests for the collection only the newer version serves were answered through a target that advertised it for a whole phase, fewer than the %d that show no false 404 among them", s.NewAPIChecked, MinRequests)
	default:
		noFalse404.Evidence = append(noFalse404.Evidence, fmt.Sprintf("%d answered through a target advertising it for the whole phase", s.NewAPIChecked))
	}
	return []promise.Verdict{
		s.ackedVerdict(countVerdict("rollout.no-lost-writes", s.LostWrites, "acknowledged write(s) missing from a final list", s.Requests)),
		s.ackedVerdict(countVerdict("rollout.no-missed-watch-events", s.MissedWatchEvents, "acknowledged write(s) the watch never delivered", s.Requests)),
		noFalse404,
		forbiddenVerdict(s.Forbidden, s.Requests),
	}
}

// ackedVerdict is v, a promise on the acknowledged writes, unless too few
// were acknowledged for none lost to prove anything: then an error. A
// traffic whose writes were refused (a 409, a 429) made its requests and
// acknowledged none.
func (s Summary) ackedVerdict(v promise.Verdict) promise.Verdict {
	if v.Outcome == promise.Pass && s.Acked < MinRequests {
		return promise.Errored(v.ID, "%d writes acknowledged, fewer than the %d a verdict needs", s.Acked, MinRequests)
	}
	if v.Outcome == promise.Pass {
		v.Evidence = append(v.Evidence, fmt.Sprintf("%d acknowledged writes", s.Acked))
	}
	return v
}

// countVerdict passes when bad is empty and otherwise fails, naming how
// many of requests went wrong and keeping the first few as evidence.
func countVerdict(id promise.ID, bad []string, what string, requests int) promise.Verdict {
	if len(bad) == 0 {
		return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{fmt.Sprintf("%d requests", requests)}}
	}
	const shown = 5
	ev := bad[:min(shown, len(bad))]
	return promise.Verdict{ID: id, Outcome: promise.Fail,
		Reason:   fmt.Sprintf("%d %s, of %d requests; first: %s", len(bad), what, requests, strings.Join(ev, ", ")),
		Evidence: append([]string(nil), ev...)}
}
