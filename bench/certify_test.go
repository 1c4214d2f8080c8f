package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	results "github.com/skewer-k8s/skewer/harness/report"
)

// BenchmarkCertify runs `skewer certify` for the first two of VERSIONS by
// $STRATEGY (default both), its report in $CERTIFY_OUT if set, as a user
// who installed the tool would: the binary alone, run from an empty
// directory outside the checkout, with the images cached. It records each
// run's whole time against the 15-minute target and each phase in the
// order it ran, with the share of the machine's cores it kept busy (what
// it waits on: the CPU, or restarts and timeouts with cores idle); the
// create and delete phases against the kind CLI, and the mean control
// plane replaced inside certify against a bare kubeadm replacement, both
// measured by the other benchmarks of the same run. Nothing is asserted.
func BenchmarkCertify(b *testing.B) {
	needDocker(b)
	if len(versions) < 2 {
		b.Skip("needs two versions in VERSIONS")
	}
	bin := filepath.Join(b.TempDir(), "skewer")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/skewer").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v: %s", err, out)
	}
	out := envOr("CERTIFY_OUT", b.TempDir()) // keep the report: CERTIFY_OUT=DIR
	cmd := exec.CommandContext(context.Background(), bin, "certify", "--from", versions[0].String(), "--to", versions[1].String(),
		"--strategy", envOr("STRATEGY", "both"), "--name", "bench-certify", "--out", out, "--force")
	cmd.Dir = b.TempDir() // nothing of the checkout: what it needs is embedded
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	stop := sampleCPU()
	start := time.Now()
	err := cmd.Run()
	total := time.Since(start)
	cpu := stop()
	res, lerr := results.Load(filepath.Join(out, "results.json"))
	if lerr != nil {
		b.Fatalf("certify (%v): %v", err, lerr)
	}
	fmt.Printf("skewer certify %s -> %s: %s (exit: %v)\n", versions[0], versions[1], total.Round(time.Second), err)
	report(b, total.Minutes(), "min-total")
	for _, run := range res.Runs {
		if len(run.Phases) == 0 {
			continue
		}
		first, last := run.Phases[0].Start, run.Phases[len(run.Phases)-1].End
		b.Run(run.Strategy, func(b *testing.B) { report(b, last.Sub(first).Minutes(), "min") })
		record(figure{what: fmt.Sprintf("certify %s, one pair, warm images (%s)", run.Strategy, res.Outcome), took: last.Sub(first),
			limit: certifyLimit, note: waitsOn(busyShare(cpu, first, last))})
		for _, p := range run.Phases {
			f := figure{what: "  " + clip(p.Name, 72), took: p.End.Sub(p.Start), note: waitsOn(busyShare(cpu, p.Start, p.End))}
			switch {
			case strings.HasPrefix(p.Name, "create "):
				f.anchor, f.maxRatio = anchorCreate, maxAnchorRatio
			case p.Name == "delete the cluster":
				f.anchor, f.maxRatio = anchorDelete, maxAnchorRatio
			}
			record(f)
		}
		if n, mean := replacements(run.Phases); n > 0 {
			record(figure{what: fmt.Sprintf("  a control plane replaced by surge inside certify (mean of %d)", n), took: mean,
				anchor: anchorReplace, maxRatio: maxAnchorRatio, note: "the traffic runs for all but the first"})
		}
	}
}

// replacements are the control planes a run's rollouts replaced by surge
// and their mean time: from a node's start to the membership check after
// the old one's removal.
func replacements(phases []results.Phase) (int, time.Duration) {
	var n int
	var sum time.Duration
	var from time.Time
	for _, p := range phases {
		for _, s := range p.Steps {
			switch {
			case strings.HasPrefix(s.Name, "start a ") && strings.Contains(s.Name, " to replace "):
				from = s.Start
			case strings.HasPrefix(s.Name, "check etcd members") && !from.IsZero():
				n, sum, from = n+1, sum+s.End.Sub(from), time.Time{}
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return n, sum / time.Duration(n)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
