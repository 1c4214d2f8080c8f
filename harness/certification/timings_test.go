package certification

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// A whole run's duration is kept by strategy and the parts its selection
// takes, read back for the next run of the same parts only; a file that
// cannot be read is started again, not an error of the run.
func TestTimingsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache", "timings.json")
	in := input(t)
	if err := recordTook(path, in, rollout.StrategySurge, PastRun{Took: 27*time.Minute + 5*time.Second + 400*time.Millisecond, Phases: 21}); err != nil {
		t.Fatal(err)
	}
	one := in
	for _, id := range checkedBy(rollout.StrategyInPlace) {
		if one.Only = []promise.ID{id}; timingKey(one, rollout.StrategyInPlace) != timingKey(in, rollout.StrategyInPlace) {
			break
		}
	}
	if timingKey(one, rollout.StrategyInPlace) == timingKey(in, rollout.StrategyInPlace) {
		t.Fatal("no promise of the in-place run is judged by fewer parts than the whole")
	}
	if err := recordTook(path, one, rollout.StrategyInPlace, PastRun{Took: 3 * time.Minute, Phases: 4}); err != nil {
		t.Fatal(err)
	}
	took, err := readTimings(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := took[timingKey(in, rollout.StrategySurge)]; got != (PastRun{27*time.Minute + 5*time.Second, 21}) {
		t.Errorf("surge: %s kept, want 27m5s in 21 phases", got)
	}
	if got := took[timingKey(one, rollout.StrategyInPlace)]; got != (PastRun{3 * time.Minute, 4}) {
		t.Errorf("one promise in place: %s kept, want 3m0s in 4 phases", got)
	}
	if _, ok := took[timingKey(in, rollout.StrategyInPlace)]; ok {
		t.Errorf("the whole in-place run took the time of a selection's: %v", took)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := recordTook(path, in, rollout.StrategySurge, PastRun{Took: time.Minute, Phases: 3}); err != nil {
		t.Fatalf("a damaged file stopped the keeping: %v", err)
	}
	if took, err := readTimings(path); err != nil || took[timingKey(in, rollout.StrategySurge)] != (PastRun{time.Minute, 3}) {
		t.Errorf("after a damaged file: %v, %v", took, err)
	}
	// A file from before phases were counted: the time still read.
	if err := os.WriteFile(path, []byte(`{"`+timingKey(in, rollout.StrategySurge)+`": "24m29s"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if took, err := readTimings(path); err != nil || took[timingKey(in, rollout.StrategySurge)] != (PastRun{Took: 24*time.Minute + 29*time.Second}) {
		t.Errorf("an older file: %v, %v", took, err)
	}
}

func TestProgress(t *testing.T) {
	last := PastRun{Took: 27 * time.Minute, Phases: 21}
	for _, tc := range []struct {
		k       int
		elapsed time.Duration
		last    PastRun
		want    string
	}{
		{5, 3*time.Minute + 10*time.Second, PastRun{}, " (phase 5, at 3m10s)"},
		{5, 3*time.Minute + 10*time.Second, last, " (phase 5 of 21, at 3m10s; about 24m0s left, by the last whole run here: 27m0s)"},
		{5, 3*time.Minute + 10*time.Second, PastRun{Took: 27 * time.Minute}, " (phase 5, at 3m10s; about 24m0s left, by the last whole run here: 27m0s)"},
		{20, 26*time.Minute + 30*time.Second, last, " (phase 20 of 21, at 26m30s; under a minute left, by the last whole run here: 27m0s)"},
		{22, 30 * time.Minute, last, " (phase 22, at 30m0s; past the last whole run here: 27m0s)"},
	} {
		if got := progress(tc.k, tc.elapsed, tc.last); got != tc.want {
			t.Errorf("progress(%d, %s, %v) = %q, want %q", tc.k, tc.elapsed, tc.last, got, tc.want)
		}
	}
}
