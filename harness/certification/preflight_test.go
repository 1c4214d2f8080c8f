package certification

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
)

// A machine fit for the run, and each way one is not: every check refuses
// on its own, names what to do, and reports without refusing when ignored.
func TestPreflight(t *testing.T) {
	in := input(t)
	paths := Paths{DockerRoot: "/var/lib/docker", GoCache: "/home/u/.cache/go-build", Cache: "/home/u/.cache/skewer", Out: "results"}
	fit := func() Machine {
		return Machine{
			Clusters:     []string{"other"},
			Containers:   []string{"skewer-certify-surgeon", "skewer-certify-surge-helper"},
			Free:         map[string]uint64{paths.DockerRoot: 100 * gb, paths.GoCache: 100 * gb, paths.Cache: 100 * gb, paths.Out: 100 * gb},
			Device:       map[string]uint64{paths.DockerRoot: 1, paths.GoCache: 1, paths.Cache: 1, paths.Out: 1},
			MemAvailable: 20 * gb,
		}
	}
	build := []version.Version{in.Pair.To}
	if lines, err := in.preflight(fit(), paths, build, nil); err != nil {
		t.Fatalf("a machine fit for the run refused: %v\n%s", err, strings.Join(lines, "\n"))
	}
	for name, tc := range map[string]struct {
		check  string
		spoil  func(*Machine)
		builds []version.Version
		want   string
	}{
		"no engine": {"docker", func(m *Machine) { m.Docker = errors.New("no Docker engine answers") }, nil, "no Docker engine answers"},
		"a cluster of the in-place run's name": {"clusters", func(m *Machine) { m.Clusters = append(m.Clusters, "skewer-certify-in-place") },
			nil, "a cluster named skewer-certify-in-place exists, and the in-place run makes one"},
		"a container named as a node": {"containers", func(m *Machine) { m.Containers = append(m.Containers, "skewer-certify-surge-control-plane2") },
			nil, "a container named skewer-certify-surge-control-plane2 is here"},
		"sudo would prompt": {"root", func(m *Machine) { m.NeedsRoot, m.Root = true, errors.New("a password is required") },
			build, "debootstrap, which needs root"},
		// 1 filesystem: a cluster (6) and one build (4 + 2 + 2) and two runs' evidence.
		"one filesystem short of a build": {"disk", func(m *Machine) {
			for p := range m.Free {
				m.Free[p] = 14 * gb
			}
		}, build, "14.0 GiB free on the filesystem of /var/lib/docker, /home/u/.cache/go-build, /home/u/.cache/skewer, results, the run needs about 14.5 GiB"},
		"Docker's root alone short of a cluster": {"disk", func(m *Machine) {
			m.Device[paths.DockerRoot], m.Free[paths.DockerRoot] = 2, 5*gb
		}, nil, "5.0 GiB free on the filesystem of /var/lib/docker, the run needs about 6.0 GiB"},
		"memory": {"memory", func(m *Machine) { m.MemAvailable = 3 * gb }, nil, "3.0 GiB of memory available, a run under traffic needs about 4.0 GiB"},
	} {
		t.Run(name, func(t *testing.T) {
			m := fit()
			tc.spoil(&m)
			builds := tc.builds
			if builds == nil {
				builds = []version.Version{}
			}
			lines, err := in.preflight(m, paths, builds, nil)
			if err == nil || !strings.Contains(err.Error(), "[preflight] "+tc.check+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refusal = %v, want the %s check saying %q\n%s", err, tc.check, tc.want, strings.Join(lines, "\n"))
			}
			if n := strings.Count(err.Error(), "[preflight]"); n != 1 {
				t.Errorf("%d refusals, want only the %s check's: %v", n, tc.check, err)
			}
			for _, ignore := range []string{tc.check, "all"} {
				lines, err := in.preflight(m, paths, builds, []string{ignore})
				if err != nil || !strings.Contains(strings.Join(lines, "\n"), "[preflight] "+tc.check+": ignored: ") {
					t.Errorf("ignoring %s: refusal %v, lines:\n%s", ignore, err, strings.Join(lines, "\n"))
				}
			}
		})
	}
	// Only the runs that make a cluster count: a selection the in-place
	// run judges nothing of leaves its name free to take.
	surgeOnly := in
	for _, id := range checkedBy(rollout.StrategySurge) {
		if !slices.Contains(checkedBy(rollout.StrategyInPlace), id) {
			surgeOnly.Only = []promise.ID{id}
			break
		}
	}
	m := fit()
	m.Clusters = append(m.Clusters, "skewer-certify-in-place")
	if _, err := surgeOnly.preflight(m, paths, nil, nil); err != nil {
		t.Errorf("a run that makes no cluster refused for its name: %v", err)
	}
}
