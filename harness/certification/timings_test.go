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
	if err := recordTook(path, in, rollout.StrategySurge, 27*time.Minute+5*time.Second+400*time.Millisecond); err != nil {
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
	if err := recordTook(path, one, rollout.StrategyInPlace, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	took, err := readTimings(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := took[timingKey(in, rollout.StrategySurge)]; got != 27*time.Minute+5*time.Second {
		t.Errorf("surge: %s kept, want 27m5s", got)
	}
	if got := took[timingKey(one, rollout.StrategyInPlace)]; got != 3*time.Minute {
		t.Errorf("one promise in place: %s kept, want 3m0s", got)
	}
	if _, ok := took[timingKey(in, rollout.StrategyInPlace)]; ok {
		t.Errorf("the whole in-place run took the time of a selection's: %v", took)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := recordTook(path, in, rollout.StrategySurge, time.Minute); err != nil {
		t.Fatalf("a damaged file stopped the keeping: %v", err)
	}
	if took, err := readTimings(path); err != nil || took[timingKey(in, rollout.StrategySurge)] != time.Minute {
		t.Errorf("after a damaged file: %v, %v", took, err)
	}
}

func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		elapsed, last time.Duration
		want          string
	}{
		{3*time.Minute + 10*time.Second, 0, " (at 3m10s)"},
		{3*time.Minute + 10*time.Second, 27 * time.Minute, " (at 3m10s; about 24m0s left, by the last whole run here: 27m0s)"},
		{26*time.Minute + 30*time.Second, 27 * time.Minute, " (at 26m30s; under a minute left, by the last whole run here: 27m0s)"},
		{30 * time.Minute, 27 * time.Minute, " (at 30m0s; past the last whole run here: 27m0s)"},
	} {
		if got := progress(tc.elapsed, tc.last); got != tc.want {
			t.Errorf("progress(%s, %s) = %q, want %q", tc.elapsed, tc.last, got, tc.want)
		}
	}
}
