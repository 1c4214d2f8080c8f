package traffic

import (
	"fmt"
	"net/http"
	"time"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// CauseAuthorizerNotSynced is the cause of a 403 that an apiserver's
// authorizer decided (the audit event says forbid) within startingFor of
// that apiserver's start (its kept log's Version line), for a request its
// stream was allowed later, the same verb with the same credentials, the
// RBAC objects untouched: the authorizer had not yet seen what the
// cluster holds. kube-apiserver serves requests before its RBAC informers
// have synced; a request that reaches it then is denied.
const CauseAuthorizerNotSynced = "authorizer-not-synced"

// startingFor is how long after its start an apiserver counts as still
// starting: kubeadm's default bound for a control-plane component to
// become healthy (ClusterConfiguration timeouts.controlPlaneComponentHealthCheck,
// 4m0s), which the harness's own wait for a new control plane shares
// (rollout/control-plane-ready). An apiserver that denies later is not
// one whose informers are still syncing.
const startingFor = 4 * time.Minute

// Forbidden is one 403 the traffic met, and what the audit logs say of it.
type Forbidden struct {
	Record
	// Logged is the apiserver whose audit log holds the request's denial
	// ("" when none does); Forwarded, the one that allowed it and
	// forwarded it there through the proxy ("" when it was not).
	Logged, Forwarded string
	// Decision and Reason are the denying authorizer's, from the audit
	// event's annotations.
	Decision, Reason string
	// Started is the denying apiserver's last start before the denial,
	// from its kept log ("" when the log shows none).
	Started string
	// Cause is why it was denied, when the evidence shows it
	// (CauseAuthorizerNotSynced), else promise.UnknownCause.
	Cause string
}

// ExplainForbidden gives each record of forbidden its cause: events are
// the final audit events by audit ID (one per apiserver that logged it);
// records is the whole traffic, in which a later success of the same
// stream and verb shows the credentials were allowed all along; logs
// reads the kept log of a node's apiservers, which says when the denying
// one started. The denial may be the entry server's or, for a request the
// proxy forwarded, the peer's: each logs the request under the same
// audit ID.
func ExplainForbidden(forbidden, records []Record, events map[string][]audit.Logged, logs func(node string) ([]cluster.LogLine, error)) []Forbidden {
	logs = keptOnce(logs)
	var out []Forbidden
	for _, r := range forbidden {
		f := Forbidden{Record: r, Cause: promise.UnknownCause}
		var denial *audit.Logged
		for i, e := range events[r.AuditID] {
			node := e.Server()
			switch e.Annotations["authorization.k8s.io/decision"] {
			case "forbid":
				denial = &events[r.AuditID][i]
				f.Logged = node
			case "allow":
				f.Forwarded = node
			}
		}
		if denial == nil {
			if evs := events[r.AuditID]; len(evs) > 0 {
				f.Logged, f.Forwarded = evs[0].Server(), ""
			}
			out = append(out, f)
			continue
		}
		f.Decision, f.Reason = "forbid", denial.Annotations["authorization.k8s.io/reason"]
		started, err := lastStart(logs, f.Logged, r.Time)
		switch {
		case err != nil:
			f.Started = "its kept log could not be read: " + err.Error()
		case !started.IsZero():
			f.Started = started.Format("15:04:05.000")
		}
		if denial.ResponseStatus != nil && denial.ResponseStatus.Code == http.StatusForbidden && allowedLater(r, records) &&
			!started.IsZero() && r.Time.Sub(started) <= startingFor {
			f.Cause = CauseAuthorizerNotSynced
		}
		out = append(out, f)
	}
	return out
}

// lastStart is the time of node's apiserver's last start at or before t
// (lastVersion); zero when its kept log shows none.
func lastStart(logs func(node string) ([]cluster.LogLine, error), node string, t time.Time) (time.Time, error) {
	lines, err := logs(node)
	if err != nil {
		return time.Time{}, err
	}
	at, _ := lastVersion(lines, t)
	return at, nil
}

// allowedLater says whether r's stream later had the same verb served.
func allowedLater(r Record, records []Record) bool {
	for _, o := range records {
		if o.Target == r.Target && o.Conn == r.Conn && o.Verb == r.Verb && o.Time.After(r.Time) && o.Code >= 200 && o.Code < 300 {
			return true
		}
	}
	return false
}

func (f Forbidden) String() string {
	where := "logged by no apiserver"
	switch {
	case f.Decision != "" && f.Forwarded != "":
		where = fmt.Sprintf("forwarded by %s, denied by the peer %s (decision %q, reason %q)", f.Forwarded, f.Logged, f.Decision, f.Reason)
	case f.Decision != "":
		where = fmt.Sprintf("denied by %s (decision %q, reason %q)", f.Logged, f.Decision, f.Reason)
	case f.Logged != "":
		where = fmt.Sprintf("logged by %s, which did not deny it", f.Logged)
	}
	if f.Decision != "" {
		started := f.Started
		if started == "" {
			started = "not in its kept log"
		}
		where += ", its apiserver's start " + started
	}
	return fmt.Sprintf("%s %s %s via %s on a %s connection, audit ID %s, %s: %s",
		f.Time.Format("15:04:05.000"), f.Verb, f.Object, f.Target, f.Conn, f.AuditID, where, f.Cause)
}

// forbiddenVerdict holds the 403s to rollout.no-false-403: none through
// the load balancer, the way clients are meant to reach the cluster. Those
// from apiservers addressed directly are counted in the evidence.
func forbiddenVerdict(all []Forbidden, requests int) promise.Verdict {
	const id = "rollout.no-false-403"
	var bad, causes []string
	direct := map[string]int{}
	for _, f := range all {
		if f.Target != "lb" {
			direct[f.Target]++
			continue
		}
		bad = append(bad, f.String())
		causes = append(causes, f.Cause)
	}
	v := countVerdict(id, bad, "request(s) through the load balancer denied (403) to the traffic's user, whom the cluster authorizes", requests)
	v.Causes = causes
	if len(direct) > 0 {
		v.Evidence = append(v.Evidence, fmt.Sprintf("403s from apiservers addressed directly (measured, not judged): %v", direct))
	}
	return v
}
