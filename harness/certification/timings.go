package certification

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// LastTook is how long the run of strategy s, with in's selection, took
// here last time; 0 when none has run whole.
func (in Input) LastTook(s rollout.Strategy) time.Duration {
	took, _ := readTimings(TimingsFile())
	return took[timingKey(in, s)]
}

func readTimings(path string) (map[string]time.Duration, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kept map[string]string
	if err := json.Unmarshal(raw, &kept); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	took := map[string]time.Duration{}
	for k, v := range kept {
		if d, err := time.ParseDuration(v); err == nil {
			took[k] = d
		}
	}
	return took, nil
}

// recordTook keeps d as the last duration of the run of s; a file that
// cannot be read is started again.
func recordTook(path string, in Input, s rollout.Strategy, d time.Duration) error {
	took, err := readTimings(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) || took == nil {
		took = map[string]time.Duration{}
	}
	took[timingKey(in, s)] = d
	kept := map[string]string{}
	for k, v := range took {
		kept[k] = v.Round(time.Second).String()
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

// progress is what a phase's first line adds: how far into the run it
// starts, and how much is left by the last whole run here.
func progress(elapsed, last time.Duration) string {
	at := elapsed.Round(time.Second)
	switch {
	case last == 0:
		return fmt.Sprintf(" (at %s)", at)
	case elapsed >= last:
		return fmt.Sprintf(" (at %s; past the last whole run here: %s)", at, last)
	case last-elapsed < time.Minute:
		return fmt.Sprintf(" (at %s; under a minute left, by the last whole run here: %s)", at, last)
	default:
		return fmt.Sprintf(" (at %s; about %s left, by the last whole run here: %s)", at, (last - elapsed).Round(time.Minute), last)
	}
}
