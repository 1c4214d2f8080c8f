package traffic

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/version"
)

func TestForbiddenIsExplainedOnlyByTheAuditLogAndALaterSuccess(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	logged := func(node, id, decision, reason string) audit.Logged {
		return audit.Logged{Path: "/state/audit/" + node + "/audit.log", Event: audit.Event{AuditID: types.UID(id), Stage: "ResponseComplete",
			ResponseStatus: &metav1.Status{Code: 403},
			Annotations:    map[string]string{"authorization.k8s.io/decision": decision, "authorization.k8s.io/reason": reason}}}
	}
	records := []Record{
		{Time: at(0), Target: "lb", Conn: New, Verb: "create", Code: 201, AuditID: "a0"},
		{Time: at(1), Target: "lb", Conn: New, Verb: "create", Code: 403, AuditID: "synced-later"},
		{Time: at(2), Target: "lb", Conn: Reused, Verb: "create", Code: 403, AuditID: "never-allowed-after"},
		{Time: at(3), Target: "lb", Conn: New, Verb: "create", Code: 403, AuditID: "not-logged"},
		{Time: at(4), Target: "lb", Conn: New, Verb: "create", Code: 403, AuditID: "admission"},
		{Time: at(5), Target: "lb", Conn: New, Verb: "create", Code: 201, AuditID: "a5"},
		{Time: at(6), Target: "cp2", Conn: New, Verb: "create", Code: 403, AuditID: "direct"},
		{Time: at(7), Target: "cp2", Conn: New, Verb: "create", Code: 201, AuditID: "a7"},
		// Seen in CI: the entry server allowed a list of the newer-only
		// resource and forwarded it; the peer, just restarted, denied it.
		{Time: at(8), Target: "lb", Conn: Reused, Verb: "list", Code: 403, AuditID: "proxied"},
		{Time: at(9), Target: "lb", Conn: Reused, Verb: "list", Code: 200, AuditID: "a9"},
		// Allowed later too, but denied by apiservers long since started,
		// or whose start no kept log shows: not a start-up's denial.
		{Time: at(10), Target: "lb", Conn: Reused, Verb: "get", Code: 403, AuditID: "started-long-ago"},
		{Time: at(11), Target: "lb", Conn: Reused, Verb: "get", Code: 403, AuditID: "start-unknown"},
		{Time: at(12), Target: "lb", Conn: Reused, Verb: "get", Code: 200, AuditID: "a12"},
	}
	started := map[string]time.Time{"cp1": at(-30), "cp2": at(-10), "cp4": at(-5), "cp5": at(10).Add(-startingFor - time.Second)}
	logs := func(node string) ([]cluster.LogLine, error) {
		var out []cluster.LogLine
		if t, ok := started[node]; ok {
			out = append(out,
				cluster.LogLine{Time: t.Add(-time.Hour), Text: "I1204 server.go:150] Version: v1.35.4"}, // an earlier start
				cluster.LogLine{Time: t, Text: "I1204 server.go:150] Version: v1.36.3"},
				cluster.LogLine{Time: at(100), Text: "I1204 server.go:150] Version: v1.36.3"}) // one after the denial
		}
		return out, nil
	}
	events := map[string][]audit.Logged{
		"synced-later":        {logged("cp1", "synced-later", "forbid", `RBAC: clusterrole.rbac.authorization.k8s.io "cluster-admin" not found`)},
		"never-allowed-after": {logged("cp1", "never-allowed-after", "forbid", "")},
		"admission":           {logged("cp3", "admission", "allow", "RBAC: allowed by ClusterRoleBinding")},
		"direct":              {logged("cp2", "direct", "forbid", "")},
		"proxied":             {logged("cp3", "proxied", "allow", "RBAC: allowed by ClusterRoleBinding"), logged("cp4", "proxied", "forbid", "")},
		"started-long-ago":    {logged("cp5", "started-long-ago", "forbid", "")},
		"start-unknown":       {logged("cp6", "start-unknown", "forbid", "")},
	}
	var forbidden []Record
	for _, r := range records {
		if r.Code == 403 {
			forbidden = append(forbidden, r)
		}
	}
	got := ExplainForbidden(forbidden, records, events, logs)
	want := map[string]string{"synced-later": CauseAuthorizerNotSynced, "never-allowed-after": promise.UnknownCause,
		"not-logged": promise.UnknownCause, "admission": promise.UnknownCause, "direct": CauseAuthorizerNotSynced,
		"proxied": CauseAuthorizerNotSynced, "started-long-ago": promise.UnknownCause, "start-unknown": promise.UnknownCause}
	for _, f := range got {
		if f.Cause != want[f.AuditID] {
			t.Errorf("%s: cause %s, want %s", f.AuditID, f.Cause, want[f.AuditID])
		}
	}
	if s := got[0].String(); !strings.Contains(s, `denied by cp1`) || !strings.Contains(s, "cluster-admin") ||
		!strings.Contains(s, "its apiserver's start "+at(-30).Format("15:04:05.000")) {
		t.Errorf("the explanation does not say who denied it and why: %s", s)
	}
	if s := got[2].String(); !strings.Contains(s, "logged by no apiserver") {
		t.Errorf("a 403 no audit log holds: %s", s)
	}
	if s := got[3].String(); !strings.Contains(s, "logged by cp3, which did not deny it") {
		t.Errorf("a 403 its authorizer allowed: %s", s)
	}
	if s := got[5].String(); !strings.Contains(s, "forwarded by cp3, denied by the peer cp4") {
		t.Errorf("a 403 from the peer: %s", s)
	}

	if s := got[7].String(); !strings.Contains(s, "its apiserver's start not in its kept log") {
		t.Errorf("a denial by an apiserver whose start is unknown: %s", s)
	}
	v := forbiddenVerdict(got, 500)
	if v.Outcome != promise.Fail || len(v.Causes) != 7 || !strings.Contains(v.Reason, "7 request(s) through the load balancer denied") {
		t.Errorf("four 403s through the load balancer: %+v", v)
	}
	if !strings.Contains(strings.Join(v.Evidence, " "), "map[cp2:1]") {
		t.Errorf("the 403 from an apiserver addressed directly is not counted: %v", v.Evidence)
	}
	// Only the 403 explained is waived by a waiver for its cause; the
	// others keep the promise failed.
	ws := promise.Waivers{v.ID: {ID: v.ID, Observed: "403", Reason: "r", Reference: "https://x.invalid", Cause: CauseAuthorizerNotSynced,
		Versions: []string{"1.36"}}}.For(version.MustParse("v1.36.3"))
	if got := ws.Apply(v, false); got.Outcome != promise.Fail {
		t.Errorf("unexplained 403s waived: %+v", got)
	}
	if got := ws.Apply(forbiddenVerdict(ExplainForbidden([]Record{forbidden[0], forbidden[5]}, records, events, logs), 500), false); got.Outcome != promise.Waived {
		t.Errorf("a 403 of an authorizer not yet synced, with its waiver: %s %s", got.Outcome, got.Reason)
	}
	if v := forbiddenVerdict(got[4:5], 500); v.Outcome != promise.Pass {
		t.Errorf("a 403 only from an apiserver addressed directly: %s %s", v.Outcome, v.Reason)
	}
}
