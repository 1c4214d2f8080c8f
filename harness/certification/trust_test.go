package certification

import (
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// Forged identity headers and a forged hop marker gain nothing; a peer
// that believed them fails the promise.
func TestForgedHeaders(t *testing.T) {
	as := func(name string, groups ...string) *audit.Event {
		return &audit.Event{User: authnv1.UserInfo{Username: name, Groups: groups}}
	}
	gr := schema.GroupResource{Group: "x", Resource: "ys"}
	good := forgedVerdictInput{reader: "sa:reader", nobody: "sa:nobody", entry: "cp1",
		forwardedID: "f", atPeer: as("sa:reader", "system:serviceaccounts"),
		marked: apierrors.NewNotFound(gr, ""), markedID: "m", markedEntry: as("sa:reader"),
		denied: apierrors.NewForbidden(gr, "", nil), deniedID: "d", deniedEntry: as("sa:nobody")}
	if v := forgedHeaders(good); v.Outcome != promise.Pass || len(v.Evidence) != 3 || !strings.Contains(v.Evidence[1], "served by the entry server itself (404)") {
		t.Errorf("nothing gained: %+v", v)
	}
	believed := good
	believed.atPeer = as("kubernetes-admin", "system:masters")
	if v := forgedHeaders(believed); v.Outcome != promise.Fail || !strings.Contains(v.Reason, `as "kubernetes-admin" [system:masters]`) {
		t.Errorf("the peer believed the forged headers: %+v", v)
	}
	escalated := good
	escalated.markedAtPeers = []audit.Event{*as("sa:reader", "system:masters")}
	if v := forgedHeaders(escalated); v.Outcome != promise.Fail {
		t.Errorf("a marked request logged with system:masters: %+v", v)
	}
	let := good
	let.denied = nil
	if v := forgedHeaders(let); v.Outcome != promise.Fail || !strings.Contains(v.Reason, "want 403 as sa:nobody") {
		t.Errorf("the denied user let through: %+v", v)
	}
}
