package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
)

// `skewer report DIR` makes what certify publishes again from
// results.json alone, and exits as certify did.
func TestReportRendersFromResultsAlone(t *testing.T) {
	pair, err := promise.ParsePair("v1.36.3", "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	res := report.New(pair, toolInfo(), t0)
	run := report.Run{Strategy: "in-place", Cluster: "skewer-certify-in-place",
		Phases: []report.Phase{{Name: "create the cluster", Start: t0, End: t0.Add(2 * time.Minute)}}}
	for _, p := range promise.Catalogue() {
		v := promise.Verdict{ID: p.ID, Outcome: promise.NotSelected, Reason: "not in this test"}
		if p.ID == "rollout.no-lost-writes" {
			v = promise.Verdict{ID: p.ID, Outcome: promise.Fail, Reason: "1 acknowledged write missing"}
		}
		run.Promises = append(run.Promises, report.Result{Verdict: v})
	}
	res.Runs = append(res.Runs, run)
	if err := res.Finish(t0.Add(20 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{report.JUnitFile, report.SummaryFile, report.HTMLFile} {
		os.Remove(filepath.Join(dir, f))
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"report", dir, "--out", out}, &stdout, &stderr); code != exitFailed {
		t.Errorf("exit %d, want %d (a promise failed); stderr %q", code, exitFailed, stderr.String())
	}
	for _, f := range []string{report.ResultsFile, report.JUnitFile, report.SummaryFile, report.HTMLFile} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !strings.Contains(string(b), "rollout.no-lost-writes") {
			t.Errorf("%s: %v, or it does not name the failed promise", f, err)
		}
	}
	if !strings.Contains(stdout.String(), "v1.36.3") {
		t.Errorf("stdout %q lacks the summary", stdout.String())
	}

	// What is not results is refused, as bad input, and nothing written.
	os.WriteFile(filepath.Join(dir, report.ResultsFile), []byte(`{"from": "v1.36.3"}`), 0o644)
	empty := t.TempDir()
	stderr.Reset()
	if code := Run(context.Background(), []string{"report", dir, "--out", empty}, &stdout, &stderr); code != exitBadInput || !strings.Contains(stderr.String(), "does not match the results schema") {
		t.Errorf("a broken results.json: exit %d, %q", code, stderr.String())
	}
	if left, _ := os.ReadDir(empty); len(left) != 0 {
		t.Errorf("%d file(s) written from a broken results.json", len(left))
	}
}

// `skewer report merge` joins the shards of one certification into its
// results, exits as certify would have, and refuses what is not shards
// of one certification, writing nothing.
func TestReportMergeJoinsShards(t *testing.T) {
	pair, err := promise.ParsePair("v1.35.4", "v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	shard := func(areas string, fail promise.ID) string {
		res := report.New(pair, toolInfo(), t0)
		run := report.Run{Strategy: "surge", Shard: areas, Cluster: "skewer-certify-surge",
			Phases: []report.Phase{{Name: "create the cluster", Start: t0, End: t0.Add(2 * time.Minute)}}}
		for _, p := range promise.Catalogue() {
			v := promise.Verdict{ID: p.ID, Outcome: promise.Pass}
			if a := p.ID.Area(); a != "cluster" && !strings.Contains(areas, a) {
				v = promise.Verdict{ID: p.ID, Outcome: promise.NotSelected, Reason: "another shard's"}
			} else if p.ID == fail {
				v = promise.Verdict{ID: p.ID, Outcome: promise.Fail, Reason: "1 acknowledged write missing"}
			}
			run.Promises = append(run.Promises, report.Result{Verdict: v})
		}
		res.Runs = append(res.Runs, run)
		if err := res.Finish(t0.Add(15 * time.Minute)); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := res.Write(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	proxy, rest := shard("proxy", ""), shard("rollout,sidecar", "")
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"report", "merge", proxy, rest, "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "skewer certify v1.35.4 -> v1.36.3: PASS, judged 76 of 76 promises" {
		t.Errorf("headline %q", got)
	}
	merged, err := report.Load(filepath.Join(out, report.ResultsFile))
	if err != nil || len(merged.Runs) != 2 {
		t.Fatalf("merged results: %v", err)
	}

	failed := shard("rollout,sidecar", "rollout.no-lost-writes")
	stdout.Reset()
	if code := Run(context.Background(), []string{"report", "merge", proxy, failed, "--out", t.TempDir()}, &stdout, &stderr); code != exitFailed {
		t.Errorf("a shard failed a promise: exit %d, want %d", code, exitFailed)
	}

	empty := t.TempDir()
	stderr.Reset()
	if code := Run(context.Background(), []string{"report", "merge", proxy, proxy, "--out", empty}, &stdout, &stderr); code != exitBadInput || !strings.Contains(stderr.String(), "both hold the surge, shard proxy run") {
		t.Errorf("a shard given twice: exit %d, %q", code, stderr.String())
	}
	if left, _ := os.ReadDir(empty); len(left) != 0 {
		t.Errorf("%d file(s) written for shards that do not merge", len(left))
	}
}

// `skewer report soak` adds up certifications of one pair: the table on
// stdout, exit 1 when one of them failed, bad input refused.
func TestReportSoak(t *testing.T) {
	recorded := filepath.Join("..", "..", "harness", "report", "testdata", "surge-results.json")
	res, err := report.Load(recorded)
	if err != nil {
		t.Fatal(err)
	}
	run := func(fail bool) string {
		r := *res
		r.Runs = append([]report.Run(nil), res.Runs...)
		r.Runs[0].Promises = append([]report.Result(nil), res.Runs[0].Promises...)
		if fail {
			r.Runs[0].Promises[0].Verdict = promise.Verdict{ID: r.Runs[0].Promises[0].ID, Outcome: promise.Fail, Reason: "a restart no phase meant"}
		}
		if err := r.Finish(r.Finished); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := r.Write(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	passed, failed := run(false), run(true)
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"report", "soak", passed, passed}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "# Soak: v1.35.4 -> v1.36.3, 2 certification(s)") {
		t.Errorf("two passing runs: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := Run(context.Background(), []string{"report", "soak", passed, failed}, &stdout, &stderr); code != exitFailed ||
		!strings.Contains(stdout.String(), "run 2: a restart no phase meant") || !strings.Contains(stderr.String(), "1 certification(s) of 2 did not pass") {
		t.Errorf("a failed run: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	if code := Run(context.Background(), []string{"report", "soak", passed, t.TempDir()}, &stdout, &stderr); code != exitBadInput {
		t.Errorf("a folder without results: exit %d: %s", code, stderr.String())
	}
}
