package traffic

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/certify"
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
	}
	events := map[string][]audit.Logged{
		"synced-later":        {logged("cp1", "synced-later", "forbid", `RBAC: clusterrole.rbac.authorization.k8s.io "cluster-admin" not found`)},
		"never-allowed-after": {logged("cp1", "never-allowed-after", "forbid", "")},
		"admission":           {logged("cp3", "admission", "allow", "RBAC: allowed by ClusterRoleBinding")},
		"direct":              {logged("cp2", "direct", "forbid", "")},
		"proxied":             {logged("cp3", "proxied", "allow", "RBAC: allowed by ClusterRoleBinding"), logged("cp4", "proxied", "forbid", "")},
	}
	var forbidden []Record
	for _, r := range records {
		if r.Code == 403 {
			forbidden = append(forbidden, r)
		}
	}
	got := ExplainForbidden(forbidden, records, events)
	want := map[string]string{"synced-later": CauseAuthorizerNotSynced, "never-allowed-after": certify.UnknownCause,
		"not-logged": certify.UnknownCause, "admission": certify.UnknownCause, "direct": CauseAuthorizerNotSynced,
		"proxied": CauseAuthorizerNotSynced}
	for _, f := range got {
		if f.Cause != want[f.AuditID] {
			t.Errorf("%s: cause %s, want %s", f.AuditID, f.Cause, want[f.AuditID])
		}
	}
	if s := got[0].String(); !strings.Contains(s, `denied by cp1`) || !strings.Contains(s, "cluster-admin") {
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

	v := forbiddenVerdict(got, 500)
	if v.Outcome != certify.Fail || len(v.Causes) != 5 || !strings.Contains(v.Reason, "5 request(s) through the load balancer denied") {
		t.Errorf("four 403s through the load balancer: %+v", v)
	}
	if !strings.Contains(strings.Join(v.Evidence, " "), "map[cp2:1]") {
		t.Errorf("the 403 from an apiserver addressed directly is not counted: %v", v.Evidence)
	}
	// Only the 403 explained is waived by a waiver for its cause; the
	// others keep the promise failed.
	ws := certify.Waivers{v.ID: {ID: v.ID, Observed: "403", Reason: "r", Reference: "https://x.invalid", Cause: CauseAuthorizerNotSynced,
		Versions: []string{"1.36"}}}.For(version.MustParse("v1.36.3"))
	if got := ws.Apply(v, false); got.Outcome != certify.Fail {
		t.Errorf("unexplained 403s waived: %+v", got)
	}
	if got := ws.Apply(forbiddenVerdict(ExplainForbidden([]Record{forbidden[0], forbidden[5]}, records, events), 500), false); got.Outcome != certify.Waived {
		t.Errorf("a 403 of an authorizer not yet synced, with its waiver: %s %s", got.Outcome, got.Reason)
	}
	if v := forbiddenVerdict(got[4:5], 500); v.Outcome != certify.Pass {
		t.Errorf("a 403 only from an apiserver addressed directly: %s %s", v.Outcome, v.Reason)
	}
}
