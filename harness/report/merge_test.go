package report

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// recorded is the results of a real certification (v1.35.4 -> v1.36.3 by
// surge, on this project's 2-core machine, session 17; each promise added since from
// the live run that first judged it, the guard's signal tables too), its evidence cut
// to two lines a promise: 75 of 76 judged (one not applicable on this machine's kernel), 70 pass, 5 waived.
func recorded(t *testing.T) *Results {
	t.Helper()
	r, err := Load(filepath.Join("testdata", "surge-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// shard is what `certify --shard areas` would have written of r: the
// promises of the areas (and cluster's, which every run judges of itself)
// as r judged them, the others not selected.
func shard(t *testing.T, r *Results, areas string, took time.Duration) *Results {
	t.Helper()
	s := *r
	s.Runs = nil
	for _, run := range r.Runs {
		run.Shard = areas
		run.Cluster += "-" + strings.ReplaceAll(areas, ",", "-")
		run.Promises = append([]Result(nil), run.Promises...)
		for i, p := range run.Promises {
			if a := p.ID.Area(); a != "cluster" && !strings.Contains(","+areas+",", ","+a+",") {
				run.Promises[i].Verdict = promise.Verdict{ID: p.ID, Outcome: promise.NotSelected, Reason: "not among --only"}
				run.Promises[i].Measured = nil
			}
		}
		s.Runs = append(s.Runs, run)
	}
	s.Finished = s.Started.Add(took)
	if err := s.Finish(s.Finished); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestMergeShardsOfARecordedCertification(t *testing.T) {
	whole := recorded(t)
	proxy, rollout, sidecar := shard(t, whole, "proxy", 25*time.Minute), shard(t, whole, "rollout", 17*time.Minute), shard(t, whole, "sidecar", 10*time.Minute)
	for _, s := range []*Results{proxy, rollout, sidecar} {
		if s.Coverage.Judged == whole.Coverage.Judged {
			t.Fatalf("a shard judged the whole catalogue: %s", s.Coverage)
		}
	}
	m, err := Merge(proxy, rollout, sidecar)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != promise.Pass || m.Coverage.Judged != 75 || len(m.Coverage.Unjudged) != 1 {
		t.Errorf("merged: %s, want PASS, judged 75 of 76", m.Headline())
	}
	if !m.Finished.Equal(whole.Started.Add(25 * time.Minute)) {
		t.Errorf("merged finished at %s, want the last shard's end", m.Finished)
	}
	// Every promise counted once, as in the certification run whole; the
	// cluster's, judged by every shard of itself, once per shard.
	got, want := m.Counts(), whole.Counts()
	want[promise.Pass] += 2 * 2 // cluster.no-unexpected-restarts and nodes-stay-ready, twice more
	for _, o := range promise.Outcomes {
		if got[o] != want[o] {
			t.Errorf("%s: %d, want %d (%v)", o, got[o], want[o], got)
		}
	}
	sum := m.Summary()
	for _, s := range []string{"surge, shard proxy on", "surge, shard sidecar on", "more promises are another shard's to judge"} {
		if !strings.Contains(sum, s) {
			t.Errorf("the summary lacks %q", s)
		}
	}
	if strings.Contains(sum, "## Not selected") {
		t.Error("the summary lists as not selected promises another shard judged")
	}
	var page strings.Builder
	if err := m.html(&page, ""); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), `data-outcome="not-selected"`); n != 0 {
		t.Errorf("report.html shows %d rows of promises another shard judged", n)
	}
	if !strings.Contains(page.String(), "more promises are another shard") {
		t.Error("report.html does not say the rest are another shard's")
	}
	dir := t.TempDir()
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if back.Headline() != m.Headline() || len(back.Runs) != 3 || back.Runs[1].Shard != "rollout" {
		t.Errorf("read back: %s, %d runs", back.Headline(), len(back.Runs))
	}
}

// A strategy run whole joins the shards of another: the in-place run
// beside the surge run's shards.
func TestMergeAStrategyRunWhole(t *testing.T) {
	whole := recorded(t)
	inPlace := *whole
	inPlace.Runs = append([]Run(nil), whole.Runs...)
	inPlace.Runs[0].Strategy = "in-place"
	m, err := Merge(shard(t, whole, "proxy", time.Minute), &inPlace, shard(t, whole, "rollout,sidecar", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 3 || m.Runs[1].Label() != "in-place" || m.Outcome != promise.Pass {
		t.Errorf("merged %d runs, the second %q: %s", len(m.Runs), m.Runs[1].Label(), m.Headline())
	}
}

func TestMergeKeepsWhatNoShardJudgedUnjudged(t *testing.T) {
	whole := recorded(t)
	m, err := Merge(shard(t, whole, "proxy", time.Minute), shard(t, whole, "rollout", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Coverage.String(); got != "judged 48 of 76 promises; not judged: sidecar 28 of 28" {
		t.Errorf("coverage %q", got)
	}
	if !strings.Contains(m.Summary(), "## Not selected") {
		t.Error("the summary does not list the promises no shard selected")
	}
}

func TestMergeOfAFailedOrCutShortShard(t *testing.T) {
	whole := recorded(t)
	proxy, rollout := shard(t, whole, "proxy", time.Minute), shard(t, whole, "rollout", time.Minute)
	for i, p := range rollout.Runs[0].Promises {
		if p.ID == "rollout.no-lost-writes" {
			rollout.Runs[0].Promises[i].Verdict = promise.Verdict{ID: p.ID, Outcome: promise.Fail, Reason: "2 acknowledged writes missing"}
		}
	}
	if err := rollout.Finish(rollout.Finished); err != nil {
		t.Fatal(err)
	}
	m, err := Merge(proxy, rollout)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != promise.Fail {
		t.Errorf("a shard failed a promise; merged %s", m.Outcome)
	}
	proxy.Incomplete = "interrupted (SIGTERM) in the mixed window"
	if err := proxy.Finish(proxy.Finished); err != nil {
		t.Fatal(err)
	}
	m, err = Merge(proxy, rollout)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome != promise.Incomplete || !strings.Contains(m.Incomplete, "surge, shard proxy: interrupted") {
		t.Errorf("a shard was cut short; merged %s (%q)", m.Outcome, m.Incomplete)
	}
}

func TestMergeRefusesWhatIsNotOneCertification(t *testing.T) {
	whole := recorded(t)
	base := func() *Results { return shard(t, whole, "proxy", time.Minute) }
	other := func(change func(*Results)) *Results {
		r := shard(t, whole, "rollout", time.Minute)
		change(r)
		return r
	}
	for _, tc := range []struct {
		name   string
		inputs []*Results
		want   string
	}{
		{"nothing", nil, "no results to merge"},
		{"another pair", []*Results{base(), other(func(r *Results) { r.To = "v1.36.2" })}, "its pair: "},
		{"another build of skewer", []*Results{base(), other(func(r *Results) { r.Tool.Commit = "0123abc" })}, "its skewer: "},
		{"strict and not", []*Results{base(), other(func(r *Results) { r.Strict = true })}, "its --strict: true"},
		{"another budget", []*Results{base(), other(func(r *Results) { b := *r.Budget; b.MaxFailed = 0.05; r.Budget = &b })}, "its budget: "},
		{"other guard thresholds", []*Results{base(), other(func(r *Results) { g := promise.DefaultGuard; g.MinSample = 20; r.GuardThresholds = &g })}, "its guard thresholds: "},
		{"other node images", []*Results{base(), other(func(r *Results) { r.Images = append([]NodeImage(nil), r.Images...); r.Images[0].ID = "sha256:0000" })}, "its node images: "},
		{"a strategy whole and in shards", []*Results{base(), whole}, "inputs 1 and 2 both judge the surge run's promises: one holds it whole"},
		{"a strategy in shards and whole", []*Results{whole, base()}, "inputs 1 and 2 both judge the surge run's promises: one holds it whole"},
		{"a shard twice", []*Results{base(), base()}, "inputs 1 and 2 both hold the surge, shard proxy run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Merge(tc.inputs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Merge = %v, %v; want an error with %q", m, err, tc.want)
			}
		})
	}
}
