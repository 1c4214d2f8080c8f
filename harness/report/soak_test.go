package report

import (
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// again is the recorded certification as another run of the soak would
// have left it: took long, with the verdict of id set to v's outcome.
func again(t *testing.T, took time.Duration, id promise.ID, o promise.Outcome, reason string) *Results {
	t.Helper()
	r := recorded(t)
	r.Runs[0].Promises = append([]Result(nil), r.Runs[0].Promises...)
	for i, p := range r.Runs[0].Promises {
		if p.ID == id {
			r.Runs[0].Promises[i].Verdict = promise.Verdict{ID: id, Outcome: o, Reason: reason}
		}
	}
	if err := r.Finish(r.Started.Add(took)); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSoakFindsTheFlake(t *testing.T) {
	const flaky = promise.ID("sidecar.termination.bounded-flush")
	runs := []*Results{
		again(t, 26*time.Minute, flaky, promise.Pass, ""),
		again(t, 25*time.Minute, flaky, promise.Fail, "the Pod was gone 27 s after the first SIGTERM, bound 21 s"),
		again(t, 31*time.Minute, flaky, promise.Pass, ""),
	}
	s, err := NewSoak([]string{"soak/run-01", "soak/run-02", "soak/run-03"}, runs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Passed() {
		t.Error("a soak with a failed certification passed")
	}
	var odd []promise.ID
	for _, r := range s.Rows {
		if r.Varies() || r.Failed() {
			odd = append(odd, r.ID)
		}
	}
	// The recorded run's own waivers are the same every time: not odd.
	if len(odd) != 1 || odd[0] != flaky {
		t.Errorf("odd promises %v, want only %s", odd, flaky)
	}
	md := s.Markdown()
	for _, want := range []string{
		"# Soak: v1.35.4 -> v1.36.3, 3 certification(s)",
		"| 2 | fail | 25m0s |",
		"min 25m0s, median 26m0s, max 31m0s",
		"## 1 promise(s) that varied between runs or failed in one",
		"| surge | `sidecar.termination.bounded-flush` | 2 | 0 | 1 | 0 | 0 | 0 | 0 |",
		"run 2: the Pod was gone 27 s after the first SIGTERM",
		"## 75 promise(s) the same in every run",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the soak's table lacks %q:\n%s", want, md)
		}
	}
}

func TestSoakOfRunsThatAgree(t *testing.T) {
	r := recorded(t)
	s, err := NewSoak([]string{"a", "b"}, []*Results{r, r})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Passed() || !strings.Contains(s.Markdown(), "Every promise came out the same in every run, and none failed.") {
		t.Errorf("two equal passing runs:\n%s", s.Markdown())
	}
}

// A certification that lacks a run, or was cut short, counts against
// the soak: a promise not judged there is missing, never a pass.
func TestSoakCountsWhatARunLacks(t *testing.T) {
	cut := *recorded(t)
	cut.Runs = nil
	cut.Incomplete = "interrupted in run 1 of 1 (context canceled)"
	if err := cut.Finish(cut.Started.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s, err := NewSoak([]string{"a", "b"}, []*Results{recorded(t), &cut})
	if err != nil {
		t.Fatal(err)
	}
	if s.Passed() {
		t.Error("a soak with an incomplete certification passed")
	}
	for _, r := range s.Rows {
		if r.Missing() != 1 || !r.Failed() {
			t.Fatalf("%s: missing %d, failed %v; want missing in one run, counted as failed", r.ID, r.Missing(), r.Failed())
		}
	}
	if md := s.Markdown(); !strings.Contains(md, "incomplete (interrupted in run 1 of 1") {
		t.Errorf("the incomplete run is not said:\n%s", md)
	}
}

func TestSoakRefusesAnotherPair(t *testing.T) {
	other := *recorded(t)
	other.From, other.To = "v1.36.3", "v1.37.2"
	if _, err := NewSoak([]string{"a", "b"}, []*Results{recorded(t), &other}); err == nil || !strings.Contains(err.Error(), "a soak repeats one pair") {
		t.Errorf("two pairs in one soak: %v", err)
	}
	if _, err := NewSoak(nil, nil); err == nil {
		t.Error("a soak of nothing")
	}
}
