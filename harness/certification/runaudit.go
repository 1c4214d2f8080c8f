package certification

import (
	"fmt"
	"time"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// CauseServerWentDown is why a side of a forwarded request has no final
// audit stage: its apiserver went down (killed, stopped, removed) while
// the request was open there. A killed process writes nothing more; one
// that stops gracefully does not wait for its watches (kube-apiserver
// --shutdown-watch-termination-grace-period is 0 unless set), so their
// final events are never written.
const CauseServerWentDown = "server-went-down"

// RunAudit judges proxy.audit.run-complete over every audit log c has had.
func RunAudit(c *cluster.Cluster) promise.Verdict {
	paths, err := c.AuditLogs()
	if err != nil {
		return fail("proxy.audit.run-complete", "the audit logs: %v", err)
	}
	handovers := map[string][]time.Time{}
	for _, p := range paths {
		server := audit.ServerOf(p)
		lines, err := c.APIServerLog(server)
		if err != nil {
			return fail("proxy.audit.run-complete", "the kept apiserver log: %v", err)
		}
		handovers[server] = cluster.Handovers(lines)
	}
	return CheckRunAudit(paths, handovers)
}

// CheckRunAudit judges proxy.audit.run-complete over the audit logs of a
// whole run (paths: every apiserver the cluster has had): every request
// the proxy forwarded, any client's, ends with one final stage at its
// entry server and at exactly one peer. A request still open at both
// when the logs end is counted, not judged. A side that never ended it
// fails the promise, with its cause: server-went-down when its apiserver
// went silent after receiving it or its process gave way to another
// (handovers, by server: cluster.Handovers), else unknown.
func CheckRunAudit(paths []string, handovers map[string][]time.Time) promise.Verdict {
	const id = "proxy.audit.run-complete"
	fwd, err := audit.Forwarded(paths, handovers)
	if err != nil {
		return fail(id, "reading the audit logs: %v", err)
	}
	if len(fwd) == 0 {
		return promise.NothingObserved(id, 1, fmt.Sprintf("request(s) forwarded by the %d apiservers the run had", len(paths)), 0)
	}
	var open int
	var lost, causes []string
	for _, f := range fwd {
		cause, what := judgeForward(f)
		switch cause {
		case "":
			continue
		case "open":
			open++
			continue
		}
		lost = append(lost, fmt.Sprintf("%s %s %s %s by %s: %s", f.Received.UTC().Format("15:04:05.000"), f.ID, f.Verb, f.URI, f.User, what))
		causes = append(causes, cause)
	}
	counted := fmt.Sprintf("%d requests forwarded in the run (%d audit logs), %d ended at both sides, %d still open at both when the logs end, %d not ended at a side",
		len(fwd), len(paths), len(fwd)-open-len(lost), open, len(lost))
	if len(lost) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Reason: counted + ", first: " + lost[0], Causes: causes,
			Evidence: append([]string{counted}, lost...)}
	}
	if open == len(fwd) { // counted, not judged: nothing ended to judge
		return promise.NothingObserved(id, 1, "forwarded request(s) ended at both sides ("+counted+")", 0)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{counted}}
}

// judgeForward says what is wrong with f and why: "" when both sides
// ended it once, "open" when neither has yet and both were up to the end.
func judgeForward(f audit.Forward) (cause, what string) {
	if len(f.Others) > 0 {
		return promise.UnknownCause, fmt.Sprintf("logged by %s, %s and %v: forwarded more than once", f.Entry.Server, f.Peer.Server, f.Others)
	}
	if f.Entry.Complete() && f.Peer.Complete() {
		return "", ""
	}
	if len(f.Entry.Finals) == 0 && len(f.Peer.Finals) == 0 && f.Entry.Down.IsZero() && f.Peer.Down.IsZero() {
		return "open", ""
	}
	var says []string
	cause = CauseServerWentDown
	for _, s := range []struct {
		role string
		side audit.Side
	}{{"entry", f.Entry}, {"peer", f.Peer}} {
		switch {
		case s.side.Complete():
			says = append(says, fmt.Sprintf("the %s %s ended it (%s at %s)", s.role, s.side.Server, s.side.Finals[0], s.side.Ended.UTC().Format("15:04:05.000")))
		case len(s.side.Finals) > 1:
			says = append(says, fmt.Sprintf("the %s %s ended it %d times %v", s.role, s.side.Server, len(s.side.Finals), s.side.Finals))
			cause = promise.UnknownCause
		case !s.side.Down.IsZero():
			says = append(says, fmt.Sprintf("the %s %s never did: it went down %s after it received it (last event %s)",
				s.role, s.side.Server, s.side.Down.Sub(f.Received).Round(time.Millisecond), s.side.Down.UTC().Format("15:04:05.000")))
		default:
			says = append(says, fmt.Sprintf("the %s %s never did, and was up to the end of the logs", s.role, s.side.Server))
			cause = promise.UnknownCause
		}
	}
	return cause, fmt.Sprintf("%s; %s", says[0], says[1])
}
