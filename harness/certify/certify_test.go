package certify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCatalogueIsWellFormed(t *testing.T) {
	if err := checkCatalogue(catalogue); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]Promise{
		{{"Mvp.Route", "x"}},
		{{"mvp", "x"}},
		{{"mvp.a", "x"}, {"mvp.a", "y"}},
		{{"mvp.a", ""}},
	} {
		if err := checkCatalogue(bad); err == nil {
			t.Errorf("catalogue %v accepted", bad)
		}
	}
}

func TestPairs(t *testing.T) {
	for _, ok := range [][2]string{{"v1.35.4", "v1.36.3"}, {"1.36.3", "v1.37.2"}, {"v1.36.3", "v1.37.0-acme.1"}} {
		if _, err := ParsePair(ok[0], ok[1]); err != nil {
			t.Errorf("%s -> %s refused: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range []struct{ from, to, want string }{
		{"v1.35.4", "v1.37.2", "not an adjacent pair"},
		{"v1.36.3", "v1.35.4", "goes backwards"},
		{"v1.36.3", "v1.36.1", "goes backwards"},
		{"v1.36.3", "v1.36.3", "not an adjacent pair"},
		{"v1.36", "v1.37.2", "--from: invalid Kubernetes version"},
		{"v1.36.3", "latest", "--to: invalid Kubernetes version"},
		{"v1.36.3", "v2.0.0", "not an adjacent pair"},
	} {
		_, err := ParsePair(bad.from, bad.to)
		if err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s -> %s: %v, want one line with %q", bad.from, bad.to, err, bad.want)
		}
	}
}

func TestVerdictsMustSayWhy(t *testing.T) {
	for _, v := range []Verdict{
		{ID: "mvp.route.verbs", Outcome: Pass},
		{ID: "mvp.route.verbs", Outcome: Fail, Reason: "expected 200, got 404"},
		{ID: "mvp.route.verbs", Outcome: Skipped, Reason: "no resource only the newer server knows"},
		{ID: "mvp.fault.only-peer-gone", Outcome: Waived, Reason: "r", Reference: "https://example.invalid/x"},
	} {
		if err := v.Validate(); err != nil {
			t.Errorf("%+v: %v", v, err)
		}
	}
	for _, v := range []Verdict{
		{ID: "mvp.no.such", Outcome: Pass},
		{ID: "mvp.route.verbs", Outcome: "reported"},
		{ID: "mvp.route.verbs", Outcome: Fail},
		{ID: "mvp.route.verbs", Outcome: Skipped},
		{ID: "mvp.route.verbs", Outcome: Waived, Reason: "r"},
	} {
		if err := v.Validate(); err == nil {
			t.Errorf("%+v accepted", v)
		}
	}
	if err := Failed([]Verdict{{ID: "mvp.route.verbs", Outcome: Pass}, {ID: "mvp.audit.complete", Outcome: Waived, Reason: "r", Reference: "https://x.invalid"}}); err != nil {
		t.Errorf("pass and waived failed the run: %v", err)
	}
	if err := Failed([]Verdict{{ID: "mvp.route.verbs", Outcome: Fail, Reason: "404"}}); err == nil {
		t.Error("a failure did not fail the run")
	}
}

// The repository's own waivers parse and waive only promises of the
// catalogue, each with an upstream reference.
func TestRepositoryWaivers(t *testing.T) {
	ws, err := LoadWaivers(filepath.Join("..", "..", UpstreamFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) == 0 {
		t.Fatal("no waivers read")
	}
	for id, w := range ws {
		t.Logf("%s waived: %s", id, w.Reference)
	}
}

func TestWaiversRefuseBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"not yaml":      "waivers: [",
		"unknown field": "waivers:\n- id: mvp.route.verbs\n  observed: o\n  reason: r\n  reference: https://x.invalid\n  expires: never\n",
		"unknown id":    "waivers:\n- id: mvp.no.such\n  observed: o\n  reason: r\n  reference: https://x.invalid\n",
		"no reason":     "waivers:\n- id: mvp.route.verbs\n  observed: o\n  reference: https://x.invalid\n",
		"no reference":  "waivers:\n- id: mvp.route.verbs\n  observed: o\n  reason: r\n  reference: see the KEP\n",
		"twice":         "waivers:\n- {id: mvp.route.verbs, observed: o, reason: r, reference: 'https://x.invalid'}\n- {id: mvp.route.verbs, observed: o, reason: r, reference: 'https://x.invalid'}\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadWaivers(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
	if _, err := LoadWaivers(filepath.Join(dir, "absent.yaml")); err == nil {
		t.Error("a missing waivers file accepted")
	}
}

func TestApplyWaivesOnlyFailuresAndStrictRefuses(t *testing.T) {
	ws := Waivers{"mvp.fault.only-peer-gone": {ID: "mvp.fault.only-peer-gone", Observed: "404", Reason: "falls through", Reference: "https://x.invalid/h"}}
	fail := Verdict{ID: "mvp.fault.only-peer-gone", Outcome: Fail, Reason: "expected 503, got 404"}
	got := ws.Apply(fail, false)
	if got.Outcome != Waived || got.Reference != "https://x.invalid/h" || !strings.Contains(got.Reason, "expected 503, got 404") {
		t.Errorf("waived: %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("a waived verdict must validate: %v", err)
	}
	strict := ws.Apply(fail, true)
	if strict.Outcome != Fail || !strings.Contains(strict.Reason, "refused by --strict") {
		t.Errorf("strict: %+v", strict)
	}
	pass := Verdict{ID: "mvp.fault.only-peer-gone", Outcome: Pass}
	if got := ws.Apply(pass, false); got.Outcome != Pass || got.Reason != "" {
		t.Error("a pass was changed by a waiver")
	}
	other := Verdict{ID: "mvp.route.verbs", Outcome: Fail, Reason: "404"}
	if ws.Apply(other, false).Outcome != Fail {
		t.Error("a failure without a waiver was waived")
	}
}

func TestWaiverForACauseCoversOnlyThatCause(t *testing.T) {
	const id = "rollout.no-false-403"
	ws := Waivers{id: {ID: id, Observed: "403", Reason: "not synced", Reference: "https://x.invalid/r", Cause: "authorizer-not-synced"}}
	for _, tc := range []struct {
		causes []string
		want   Outcome
	}{
		{[]string{"authorizer-not-synced"}, Waived},
		{[]string{"authorizer-not-synced", "authorizer-not-synced"}, Waived},
		{[]string{"authorizer-not-synced", UnknownCause}, Fail},
		{nil, Fail},
		{[]string{"forwarded"}, Fail},
	} {
		got := ws.Apply(Verdict{ID: id, Outcome: Fail, Reason: "2 403s", Causes: tc.causes}, false)
		if got.Outcome != tc.want {
			t.Errorf("causes %v: %s (%s), want %s", tc.causes, got.Outcome, got.Reason, tc.want)
		}
		if tc.want == Fail && !strings.Contains(got.Reason, "covers only the cause authorizer-not-synced") {
			t.Errorf("causes %v: the failure does not say why the waiver did not apply: %s", tc.causes, got.Reason)
		}
	}
}
