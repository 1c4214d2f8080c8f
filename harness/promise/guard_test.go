package promise

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestThresholdsRefuseBadInput(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"max5xxShare=-0.1", "want a share from 0 to 1"},
		{"max5xxShare=NaN", "want a share from 0 to 1"},
		{"maxForwardedFailures=1.5", "want a share from 0 to 1"},
		{"confidence=1", "less than 1"},
		{"maxFalse404=-1", "cannot be negative"},
		{"maxForwardedAddedP99=-1s", "cannot be negative"},
		{"minSample=0", "at least 1"},
		{"maxDiscoveryConvergence=0s", "want more than 0"},
		{"p50=1", "the name one of"},
		{"max5xxShare", "want name=value"},
		{"maxForwardedAddedP99=1", "missing unit"},
	} {
		_, err := DefaultGuard.Set(tc.set)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--guard %s: want one line saying %q, got %v", tc.set, tc.want, err)
		}
	}
	th, err := DefaultGuard.Set("max5xxShare=0.02")
	if err != nil || th.Max5xxShare != 0.02 || th.MaxForwardedFailures != DefaultGuard.MaxForwardedFailures {
		t.Errorf("--guard max5xxShare=0.02 gave %+v, %v", th, err)
	}
}

func TestThresholdsFile(t *testing.T) {
	// The file in the repository says the defaults.
	th, err := GuardThresholds{}.Load(filepath.Join("..", "..", "docs", "guard-thresholds.yaml"))
	if err != nil || th != DefaultGuard {
		t.Fatalf("docs/guard-thresholds.yaml reads %+v (%v), want the defaults %+v", th, err, DefaultGuard)
	}
	path := filepath.Join(t.TempDir(), "guard.yaml")
	for _, tc := range []struct{ file, want string }{
		{"max5xxShare: 0.05\n", ""},
		{"max5xxShare: 2\n", "want a share from 0 to 1"},
		{"p99: 1s\n", "unknown field"},
		{"maxForwardedAddedP99: 1\n", "in quotes"},
	} {
		if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		th, err := DefaultGuard.Load(path)
		switch {
		case tc.want == "" && (err != nil || th.Max5xxShare != 0.05 || th.MinSample != DefaultGuard.MinSample):
			t.Errorf("%q: got %+v, %v", tc.file, th, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: want an error saying %q, got %v", tc.file, tc.want, err)
		}
	}
}
