package certification

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
)

func authnUser(name string) authnv1.UserInfo { return authnv1.UserInfo{Username: name} }

// logs writes audit logs where a cluster keeps them: node -> events as
// "auditID stage user code".
func logs(t *testing.T, byNode map[string][]string) *cluster.Cluster {
	t.Helper()
	c := &cluster.Cluster{Name: "test", Dir: t.TempDir()}
	for node, lines := range byNode {
		path := c.AuditLog(node)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, l := range lines {
			f := strings.Fields(l)
			code := map[string]int32{"200": 200, "403": 403, "500": 500}[f[3]]
			verb := "get"
			if strings.HasPrefix(f[0], "w") { // a watch
				verb = "watch"
			}
			e := auditv1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
				AuditID: types.UID(f[0]), Stage: auditv1.Stage(f[1]), User: authnUser(f[2]), Verb: verb,
				ResponseStatus: &metav1.Status{Code: code}}
			raw, _ := json.Marshal(e)
			b.Write(append(raw, '\n'))
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// The audit accounting of forwarded and of local requests, on logs as
// apiservers write them.
func TestAuditAccounting(t *testing.T) {
	ctx := context.Background()
	old, peer := Server{Name: "cp1"}, Server{Name: "cp4"}
	w := &Window{Old: []Server{old}, New: []Server{peer}}

	c := logs(t, map[string][]string{
		"cp1": {"a RequestReceived admin 200", "a ResponseComplete admin 200", "b ResponseComplete admin 200", "w Panic admin 500"},
		"cp4": {"a ResponseComplete admin 200", "b ResponseComplete admin 200", "w ResponseComplete admin 200"},
	})
	got := CheckAudit(ctx, c, w, []string{"a", "b", "w"})
	if got[0].Outcome != promise.Pass || got[1].Outcome != promise.Pass || got[2].Outcome != promise.Fail ||
		!strings.Contains(got[2].Reason, "1 of 1 proxied watches, closed by their client, ended at cp1 in stage Panic") {
		t.Errorf("complete, with a closed watch: %+v", got)
	}

	c = logs(t, map[string][]string{
		"cp1": {"a ResponseComplete admin 200", "b ResponseComplete admin 200"},
		"cp4": {"a ResponseComplete someone-else 200"},
	})
	got = CheckAudit(ctx, c, w, []string{"a", "b"})
	if got[0].Outcome != promise.Fail || !strings.Contains(got[0].Reason, "1 missing") || !strings.Contains(got[0].Reason, "1 under another user") {
		t.Errorf("one missing at the peer, one under another user: %+v", got[0])
	}

	c = logs(t, map[string][]string{"cp1": {"x ResponseComplete admin 200"}, "cp4": {}})
	if err := notForwarded(ctx, c, old, []Server{old, peer}, []string{"x"}); err != nil {
		t.Errorf("served by cp1 alone: %v", err)
	}
	c = logs(t, map[string][]string{"cp1": {"x ResponseComplete admin 200"}, "cp4": {"x ResponseComplete admin 200"}})
	if err := notForwarded(ctx, c, old, []Server{old, peer}, []string{"x"}); err == nil || !strings.Contains(err.Error(), "cp4 logged 1 of the requests cp1 served itself") {
		t.Errorf("logged by the peer too: %v", err)
	}
}

// Stage Panic is judged by what ended in it: a watch its client closed is
// proxy.audit.watch-final-stage, put down to the reverse proxy's abort only
// when the events show it; anything else fails proxy.audit.final-stage.
// Each needs at least one request of its kind to pass.
func TestFinalStages(t *testing.T) {
	ev := func(id, verb, stage string) audit.Event {
		return audit.Event{AuditID: types.UID(id), Verb: verb, Stage: auditv1.Stage(stage), RequestURI: "/apis/x/v1/ys"}
	}
	abort := func(id string) audit.Event {
		e := ev(id, "watch", "Panic")
		e.ResponseStatus = &metav1.Status{Code: 500, Message: "APIServer panic'd: net/http: abort Handler"}
		return e
	}
	completed := map[string][]audit.Event{"b": {ev("b", "watch", "ResponseComplete")}}
	outcomes := func(vs []promise.Verdict) string {
		var parts []string
		for _, v := range vs {
			parts = append(parts, string(v.ID)+"="+string(v.Outcome)+fmt.Sprint(v.Causes))
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct {
		name   string
		finals []audit.Event
		peers  map[string][]audit.Event
		want   string
	}{
		{"all complete", []audit.Event{ev("a", "list", "ResponseComplete"), ev("b", "watch", "ResponseComplete")}, completed,
			"proxy.audit.final-stage=pass[] proxy.audit.watch-final-stage=pass[]"},
		{"the reverse proxy's abort", []audit.Event{ev("a", "list", "ResponseComplete"), abort("b")}, completed,
			"proxy.audit.final-stage=pass[] proxy.audit.watch-final-stage=fail[reverse-proxy-abort]"},
		{"a watch's Panic of another kind", []audit.Event{ev("a", "list", "ResponseComplete"), ev("b", "watch", "Panic")}, completed,
			"proxy.audit.final-stage=pass[] proxy.audit.watch-final-stage=fail[unknown]"},
		{"an abort the peer never ended", []audit.Event{ev("a", "list", "ResponseComplete"), abort("b")}, nil,
			"proxy.audit.final-stage=pass[] proxy.audit.watch-final-stage=fail[unknown]"},
		{"a create in Panic", []audit.Event{ev("a", "create", "Panic"), ev("b", "watch", "ResponseComplete")}, completed,
			"proxy.audit.final-stage=fail[] proxy.audit.watch-final-stage=pass[]"},
		{"no watch", []audit.Event{ev("a", "get", "ResponseComplete")}, nil,
			"proxy.audit.final-stage=pass[] proxy.audit.watch-final-stage=fail[]"},
		{"nothing but a watch", []audit.Event{ev("b", "watch", "ResponseComplete")}, completed,
			"proxy.audit.final-stage=fail[] proxy.audit.watch-final-stage=pass[]"},
	} {
		if got := outcomes(FinalStages("cp1", tc.finals, tc.peers)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	vs := FinalStages("cp1", []audit.Event{ev("a", "create", "Panic")}, nil)
	if vs[0].Reason != "1 of 1 proxied requests (not watches) ended at cp1 in stage Panic" || vs[0].Evidence[0] != "a (create /apis/x/v1/ys)" {
		t.Errorf("%+v", vs[0])
	}
	if !strings.HasPrefix(vs[1].Reason, "nothing observed") {
		t.Errorf("no watch: %+v", vs[1])
	}
}
