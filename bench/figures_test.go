package bench

import (
	"strings"
	"testing"
	"time"

	results "github.com/skewer-k8s/skewer/harness/report"
)

func TestParseCPU(t *testing.T) {
	busy, total, err := parseCPU(strings.NewReader("cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	// user+nice+system+irq+softirq+steal busy; idle and iowait not; guest is in user already.
	if busy != 160 || total != 1000 {
		t.Errorf("busy %d total %d, want 160 and 1000", busy, total)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, _, err := parseCPU(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestBusyShare(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	samples := []cpuSample{{at(0), 0, 0}, {at(1), 100, 200}, {at(2), 300, 400}, {at(3), 310, 600}}
	if got, ok := busyShare(samples, at(1), at(2)); !ok || got != 1 {
		t.Errorf("a busy second: %v %v, want 1", got, ok)
	}
	if got, ok := busyShare(samples, at(0), at(3)); !ok || got < 0.51 || got > 0.52 {
		t.Errorf("the whole span: %v %v, want 310/600", got, ok)
	}
	if _, ok := busyShare(samples, at(1), at(1).Add(500*time.Millisecond)); ok {
		t.Error("one sample inside a span cannot measure it")
	}
	if got := waitsOn(0.9, true); !strings.Contains(got, "bound by the CPU") {
		t.Errorf("90%% busy: %q", got)
	}
	if got := waitsOn(0.4, true); !strings.Contains(got, "idle") {
		t.Errorf("40%% busy: %q", got)
	}
}

func TestPrintFigures(t *testing.T) {
	var b strings.Builder
	printFigures(&b, []figure{
		{what: "create", took: 120 * time.Second, anchor: anchorCreate, maxRatio: 1.3},
		{what: "delete", took: 9 * time.Second, anchor: anchorDelete, maxRatio: 1.3},
		{what: "certify surge", took: 16 * time.Minute, limit: certifyLimit},
		{what: "replaced", took: time.Minute, anchor: anchorReplace, maxRatio: 1.3},
	}, map[string]time.Duration{anchorCreate: 100 * time.Second, anchorDelete: 10 * time.Second})
	out := b.String()
	for _, want := range []string{
		"kind create cluster 1m40s", "1.20x",
		"0.90x", "certify surge", "16m0s", "<= 15m0s", "NOT MET",
		"bare kubeadm replacement (not measured in this run)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, " met") != 2 {
		t.Errorf("create and delete meet their targets, certify does not:\n%s", out)
	}
}

func TestReplacements(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	step := func(name string, from, to int) results.Phase {
		return results.Phase{Name: name, Start: t0.Add(time.Duration(from) * time.Second), End: t0.Add(time.Duration(to) * time.Second)}
	}
	phases := []results.Phase{
		{Name: "the mixed window", Steps: []results.Phase{
			step("set ClusterConfiguration kubernetesVersion to v1.36.3", 0, 1),
			step("start a v1.36.3 control-plane node to replace cp3", 1, 9),
			step("join the new node with kubeadm", 9, 40),
			step("check etcd members, identity leases and load balancer backends equal the control planes", 60, 61),
		}},
		{Name: "an interrupted rollout's discard", Steps: []results.Phase{
			step("check etcd members, identity leases and load balancer backends equal the control planes", 70, 71),
		}},
		{Name: "through", Steps: []results.Phase{
			step("start a v1.36.3 control-plane node to replace cp", 100, 110),
			step("check etcd members, identity leases and load balancer backends equal the control planes", 180, 181),
		}},
	}
	n, mean := replacements(phases)
	if n != 2 || mean != 70500*time.Millisecond {
		t.Errorf("%d replacements, mean %s; want 2 of (60 s and 81 s) = 70.5 s", n, mean)
	}
}
