package certification

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/internal/source"
)

// How long a run took on this machine is kept in skewer's cache once it
// ran whole (every phase done, not interrupted), by strategy and the
// parts of a run its selection takes: the next such run says, phase by
// phase, about how much is left, and --dry-run how long it will take.
// It is a forecast for the user, never a budget a check is held to.

// TimingsFile is where the durations are kept.
func TimingsFile() string { return filepath.Join(source.CacheDir(), "timings.json") }

func timingKey(in Input, s rollout.Strategy) string {
	return string(s) + ": " + strings.Join(in.Parts(s), ", ")
}

// PastRun is how a run of one shape went here last time it ran whole.
type PastRun struct {
	Took   time.Duration
	Phases int // 0: not kept (a file from before phases were counted)
}

// String is how a kept run reads in timings.json and in a plan.
func (l PastRun) String() string {
	if l.Phases == 0 {
		return l.Took.String()
	}
	return fmt.Sprintf("%s in %d phases", l.Took, l.Phases)
}

// LastRun is how the run of strategy s, with in's selection, went here
// last time; the zero PastRun when none has run whole.
func (in Input) LastRun(s rollout.Strategy) PastRun {
	kept, _ := readTimings(TimingsFile())
	return kept[timingKey(in, s)]
}

func readTimings(path string) (map[string]PastRun, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kept map[string]string
	if err := json.Unmarshal(raw, &kept); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	runs := map[string]PastRun{}
	for k, v := range kept {
		took, phases, _ := strings.Cut(v, " in ")
		d, err := time.ParseDuration(took)
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimSuffix(phases, " phases"))
		runs[k] = PastRun{Took: d, Phases: n}
	}
	return runs, nil
}

// recordTook keeps how the run of s went; a file that cannot be read is
// started again.
func recordTook(path string, in Input, s rollout.Strategy, last PastRun) error {
	runs, err := readTimings(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) || runs == nil {
		runs = map[string]PastRun{}
	}
	last.Took = last.Took.Round(time.Second)
	runs[timingKey(in, s)] = last
	kept := map[string]string{}
	for k, v := range runs {
		kept[k] = v.String()
	}
	raw, err := json.MarshalIndent(kept, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".timings-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// progress is what phase k's first line adds: which phase of how many
// the last whole run here made, how far into the run it starts, and how
// much is left by that run.
func progress(k int, elapsed time.Duration, last PastRun) string {
	at := elapsed.Round(time.Second)
	which := fmt.Sprintf("phase %d", k)
	if last.Phases >= k {
		which += fmt.Sprintf(" of %d", last.Phases)
	}
	switch {
	case last.Took == 0:
		return fmt.Sprintf(" (%s, at %s)", which, at)
	case elapsed >= last.Took:
		return fmt.Sprintf(" (%s, at %s; past the last whole run here: %s)", which, at, last.Took)
	case last.Took-elapsed < time.Minute:
		return fmt.Sprintf(" (%s, at %s; under a minute left, by the last whole run here: %s)", which, at, last.Took)
	default:
		return fmt.Sprintf(" (%s, at %s; about %s left, by the last whole run here: %s)", which, at, (last.Took - elapsed).Round(time.Minute), last.Took)
	}
}
