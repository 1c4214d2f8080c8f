package promise

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/version"
)

func TestCatalogueIsWellFormed(t *testing.T) {
	if err := checkCatalogue(catalogue); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]Promise{
		{{"Mvp.Route", "x"}},
		{{"proxy", "x"}},
		{{"proxy.a", "x"}, {"proxy.a", "y"}},
		{{"proxy.a", ""}},
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
		{ID: "proxy.route.verbs", Outcome: Pass},
		{ID: "proxy.route.verbs", Outcome: Fail, Reason: "expected 200, got 404"},
		{ID: "proxy.route.verbs", Outcome: Error, Reason: "the window could not be opened"},
		{ID: "proxy.route.verbs", Outcome: NotApplicable, Reason: "the pair offers no resource only the newer serves"},
		{ID: "proxy.route.verbs", Outcome: NotSelected, Reason: "left out by --skip"},
		{ID: "proxy.fault.only-peer-gone", Outcome: Waived, Reason: "r", Reference: "https://example.invalid/x", Causes: []string{"no-capable-peer"}},
	} {
		if err := v.Validate(); err != nil {
			t.Errorf("%+v: %v", v, err)
		}
	}
	for _, v := range []Verdict{
		{ID: "proxy.no.such", Outcome: Pass},
		{ID: "proxy.route.verbs", Outcome: "reported"},
		{ID: "proxy.route.verbs", Outcome: "skipped", Reason: "the old outcome is gone"},
		{ID: "proxy.route.verbs", Outcome: Incomplete, Reason: "a run's outcome, not a verdict's"},
		{ID: "proxy.route.verbs", Outcome: Fail},
		{ID: "proxy.route.verbs", Outcome: Error},
		{ID: "proxy.route.verbs", Outcome: NotApplicable},
		{ID: "proxy.route.verbs", Outcome: Waived, Reason: "r"},
		{ID: "proxy.route.verbs", Outcome: Waived, Reason: "r", Reference: "https://x.invalid"},
	} {
		if err := v.Validate(); err == nil {
			t.Errorf("%+v accepted", v)
		}
	}
	if err := Failed([]Verdict{{ID: "proxy.route.verbs", Outcome: Pass}, {ID: "proxy.audit.complete", Outcome: Waived, Reason: "r", Reference: "https://x.invalid", Causes: []string{"c"}},
		{ID: "proxy.trust.uid", Outcome: NotApplicable, Reason: "rule"}, {ID: "proxy.trust.identity", Outcome: NotSelected, Reason: "--skip"}}); err != nil {
		t.Errorf("pass, waived, not applicable and not selected failed the run: %v", err)
	}
	for _, o := range []Outcome{Fail, Error} {
		if err := Failed([]Verdict{{ID: "proxy.route.verbs", Outcome: o, Reason: "404"}}); err == nil {
			t.Errorf("%s did not fail the run", o)
		}
	}
	if v := NothingObserved("proxy.audit.final-stage", 1, "proxied requests", 0); v.Outcome != Fail || !strings.HasPrefix(v.Reason, "nothing observed") {
		t.Errorf("a check below its floor: %+v", v)
	}
}

// The repository's own waivers parse and waive only promises of the
// catalogue, each with a cause, versions and an upstream reference, and
// each says where it is written.
func TestRepositoryWaivers(t *testing.T) {
	ws, err := LoadWaivers(filepath.Join("..", "..", UpstreamFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) == 0 {
		t.Fatal("no waivers read")
	}
	for id, w := range ws {
		if !strings.Contains(w.Source, "upstream.yaml:") {
			t.Errorf("%s: source %q names no line", id, w.Source)
		}
		t.Logf("%s waived for %s (%v): %s", id, w.Cause, w.Versions, w.Reference)
	}
}

func TestWaiversRefuseBadInput(t *testing.T) {
	dir := t.TempDir()
	const good = "  cause: c\n  versions: [\"1.36\"]\n  observed: o\n  reason: r\n  reference: https://x.invalid\n"
	for name, body := range map[string]string{
		"not yaml":      "waivers: [",
		"unknown field": "waivers:\n- id: proxy.route.verbs\n" + good + "  expires: never\n",
		"unknown id":    "waivers:\n- id: proxy.no.such\n" + good,
		"no reason":     "waivers:\n- id: proxy.route.verbs\n  cause: c\n  versions: [\"1.36\"]\n  observed: o\n  reference: https://x.invalid\n",
		"no reference":  "waivers:\n- id: proxy.route.verbs\n  cause: c\n  versions: [\"1.36\"]\n  observed: o\n  reason: r\n  reference: see the KEP\n",
		"no cause":      "waivers:\n- id: proxy.route.verbs\n  versions: [\"1.36\"]\n  observed: o\n  reason: r\n  reference: https://x.invalid\n",
		"unknown cause": "waivers:\n- id: proxy.route.verbs\n  cause: unknown\n  versions: [\"1.36\"]\n  observed: o\n  reason: r\n  reference: https://x.invalid\n",
		"no versions":   "waivers:\n- id: proxy.route.verbs\n  cause: c\n  observed: o\n  reason: r\n  reference: https://x.invalid\n",
		"not a minor":   "waivers:\n- id: proxy.route.verbs\n  cause: c\n  versions: [\"v1.36.3\"]\n  observed: o\n  reason: r\n  reference: https://x.invalid\n",
		"twice":         "waivers:\n- id: proxy.route.verbs\n" + good + "- id: proxy.route.verbs\n" + good,
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
	p := filepath.Join(dir, "two.yaml")
	if err := os.WriteFile(p, []byte("# two\nwaivers:\n- id: proxy.route.verbs\n"+good+"- id: proxy.trust.uid\n"+good), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := LoadWaivers(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := ws["proxy.trust.uid"].Source; got != p+":9" {
		t.Errorf("the second waiver's source is %q, want %s:9", got, p)
	}
}

// An ID or a shard under a renamed area's old name is read under the new
// one, with a note; anything else is left as it is, for the catalogue's
// own check to judge.
func TestRenamedAreas(t *testing.T) {
	for in, want := range map[ID]ID{"mvp.route.verbs": "proxy.route.verbs", "proxy.route.verbs": "proxy.route.verbs", "mvp": "mvp", "rollout.mvp.x": "rollout.mvp.x"} {
		got, note := Canonical(in)
		if got != want || (note != "") != (in != want) {
			t.Errorf("Canonical(%s) = %s, %q; want %s", in, got, note, want)
		}
	}
	if a, note := CanonicalArea("mvp"); a != "proxy" || !strings.Contains(note, "until the first tagged release") {
		t.Errorf("CanonicalArea(mvp) = %s, %q", a, note)
	}
	if a, note := CanonicalArea("rollout"); a != "rollout" || note != "" {
		t.Errorf("CanonicalArea(rollout) = %s, %q", a, note)
	}
	// A user's waivers file written before the rename still loads.
	p := filepath.Join(t.TempDir(), "old.yaml")
	const old = "waivers:\n- id: mvp.route.verbs\n  cause: c\n  versions: [\"1.36\"]\n  observed: o\n  reason: r\n  reference: https://x.invalid\n"
	if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := LoadWaivers(p)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := ws["proxy.route.verbs"]; !ok || !strings.Contains(w.Renamed, p+":2: mvp.route.verbs is proxy.route.verbs now") {
		t.Errorf("the old ID's waiver: %+v (loaded %v)", w, ws)
	}
}

var on = []version.Version{version.MustParse("v1.35.4"), version.MustParse("v1.36.3")}

func TestApplyWaivesOnlyFailuresAndStrictRefuses(t *testing.T) {
	ws := Waivers{"proxy.fault.only-peer-gone": {ID: "proxy.fault.only-peer-gone", Cause: "no-capable-peer", Versions: []string{"1.35", "1.36"},
		Observed: "404", Reason: "falls through", Reference: "https://x.invalid/h", Source: "w.yaml:3"}}.For(on...)
	fail := Verdict{ID: "proxy.fault.only-peer-gone", Outcome: Fail, Reason: "expected 503, got 404", Causes: []string{"no-capable-peer"}}
	got := ws.Apply(fail, false)
	if got.Outcome != Waived || got.Reference != "https://x.invalid/h" || !strings.Contains(got.Reason, "expected 503, got 404") || !strings.HasPrefix(got.Waiver, "w.yaml:3") {
		t.Errorf("waived: %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("a waived verdict must validate: %v", err)
	}
	strict := ws.Apply(fail, true)
	if strict.Outcome != Fail || !strings.Contains(strict.Reason, "refused by --strict") {
		t.Errorf("strict: %+v", strict)
	}
	pass := Verdict{ID: "proxy.fault.only-peer-gone", Outcome: Pass}
	if got := ws.Apply(pass, false); got.Outcome != Pass || got.Reason != "" {
		t.Error("a pass was changed by a waiver")
	}
	other := Verdict{ID: "proxy.route.verbs", Outcome: Fail, Reason: "404", Causes: []string{"no-capable-peer"}}
	if ws.Apply(other, false).Outcome != Fail {
		t.Error("a failure without a waiver was waived")
	}
	errored := Verdict{ID: "proxy.fault.only-peer-gone", Outcome: Error, Reason: "the window could not be opened"}
	if ws.Apply(errored, false).Outcome != Error {
		t.Error("a check that could not run was waived")
	}
}

// A waiver lapses outside the minors it names, and one never scoped to
// the versions in play waives nothing.
func TestWaiverLapsesOutsideItsVersions(t *testing.T) {
	loaded := Waivers{"proxy.fault.only-peer-gone": {ID: "proxy.fault.only-peer-gone", Cause: "no-capable-peer", Versions: []string{"1.35", "1.36"},
		Observed: "404", Reason: "falls through", Reference: "https://x.invalid/h", Source: "w.yaml:3"}}
	fail := Verdict{ID: "proxy.fault.only-peer-gone", Outcome: Fail, Reason: "404", Causes: []string{"no-capable-peer"}}
	if got := loaded.Apply(fail, false); got.Outcome != Fail || !strings.Contains(got.Reason, "not scoped") {
		t.Errorf("unscoped: %+v", got)
	}
	later := loaded.For(version.MustParse("v1.36.3"), version.MustParse("v1.37.2"))
	if got := later.Apply(fail, false); got.Outcome != Fail || !strings.Contains(got.Reason, "holds for 1.35, 1.36, not 1.37") {
		t.Errorf("lapsed: %+v", got)
	}
	vendor := loaded.For(version.MustParse("v1.35.4"), version.MustParse("v1.36.3-acme.1"))
	if got := vendor.Apply(fail, false); got.Outcome != Waived {
		t.Errorf("a vendor's pre-release of 1.36 is 1.36: %+v", got)
	}
}

func TestWaiverForACauseCoversOnlyThatCause(t *testing.T) {
	const id = "rollout.no-false-403"
	ws := Waivers{id: {ID: id, Observed: "403", Reason: "not synced", Reference: "https://x.invalid/r", Cause: "authorizer-not-synced", Versions: []string{"1.35", "1.36"}}}.For(on...)
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
