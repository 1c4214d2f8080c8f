package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	results "github.com/skewer-k8s/skewer/harness/report"
)

// BenchmarkCertify runs `skewer certify` for the first two of VERSIONS by
// $STRATEGY (default both), its report in $CERTIFY_OUT if set, as a user
// who installed the tool would: the binary alone, run from an empty
// directory outside the checkout, with the images cached, and
// prints the whole time, each run's, and each phase's, longest first:
// what dominates. The goal is 15 minutes a strategy or less on a 2-core
// machine; nothing is asserted. The plain tools have no certification to
// compare with; the rollout phases are the transitions kubeadm itself
// would take (BenchmarkSurgeRollout compares those with bare kubeadm).
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
	start := time.Now()
	err := cmd.Run()
	total := time.Since(start)
	res, lerr := results.Load(filepath.Join(out, "results.json"))
	if lerr != nil {
		b.Fatalf("certify (%v): %v", err, lerr)
	}
	fmt.Printf("skewer certify %s -> %s: %s (exit: %v)\n", versions[0], versions[1], total.Round(time.Second), err)
	report(b, total.Minutes(), "min-total")
	for _, run := range res.Runs {
		phases := append([]results.Phase(nil), run.Phases...)
		sort.Slice(phases, func(i, j int) bool { return phases[i].End.Sub(phases[i].Start) > phases[j].End.Sub(phases[j].Start) })
		var sum time.Duration
		for _, p := range phases {
			sum += p.End.Sub(p.Start)
		}
		b.Run(run.Strategy, func(b *testing.B) { report(b, sum.Minutes(), "min") })
		for _, p := range phases {
			d := p.End.Sub(p.Start)
			fmt.Printf("    %6.1f%%  %8s  %s\n", 100*d.Seconds()/sum.Seconds(), d.Round(time.Second), p.Name)
			for _, s := range p.Steps { // in order: where a rollout's time went
				fmt.Printf("               %8s    %s\n", s.End.Sub(s.Start).Round(time.Second), s.Name)
			}
		}
	}
}
