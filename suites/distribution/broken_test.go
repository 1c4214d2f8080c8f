package distribution

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/internal/source"
)

// broken is the negative control's configuration: the newer side's
// apiservers with the Mixed Version Proxy switched off, as a distribution
// would ship it - through certify's own input, no special code path.
const broken = "to:UnknownVersionInteroperabilityProxy=false"

// brokenPromises are what the control judges: the proxy routing the
// newer-only resource through an older apiserver, which needs the newer
// one reachable as a peer - an apiserver with the proxy's gate off
// records no peer address in its identity Lease. Only the phases it needs
// run: create, one control plane at the newer version, the route tried.
var brokenPromises = []promise.ID{"proxy.route.verbs"}

// A certification must be able to fail: certify run on a build that
// breaks the proxy fails the proxy's promises, each with its reason, the
// run's outcome is fail and skewer exits 1. It runs as a hosted runner
// would (asRunner): every file it leaves is read back as that user.
func TestCertifyABrokenBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("certifies on a kind cluster: not with -short")
	}
	g := NewWithT(t)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := source.Root()
	g.Expect(err).NotTo(HaveOccurred())
	artifacts := os.Getenv("ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(root, "_artifacts")
	}
	out := filepath.Join(artifacts, "certify-broken")
	g.Expect(os.RemoveAll(out)).To(Succeed())

	// As a hosted runner runs it: not root, in the docker group.
	user := asRunner(t)
	user.own(t, out)
	skewer := filepath.Join(user.dir, "skewer")
	build := exec.CommandContext(ctx, "go", "build", "-o", skewer, "./cmd/skewer")
	build.Dir = root
	built, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go build: %s", built)

	var only []string
	for _, id := range brokenPromises {
		only = append(only, string(id))
	}
	run := user.command(exec.CommandContext(ctx, skewer, "certify", "--from", from.String(), "--to", module.String(), "--strategy", "surge",
		"--apiserver-feature-gates", broken, "--only", strings.Join(only, ","), "--name", "skewer-broken", "--out", out))
	run.Stdout, run.Stderr = os.Stdout, os.Stderr
	run.Cancel = func() error { return run.Process.Signal(os.Interrupt) }
	run.WaitDelay = 2 * time.Minute
	runErr := run.Run()
	t.Logf("skewer certify (expected to fail) as %s: %v; results in %s", user, runErr, out)
	g.Expect(user.unreadable(t, out)).To(BeEmpty(), "what skewer wrote and exported, read by the user who ran it")
	audit, err := filepath.Glob(filepath.Join(out, report.EvidenceDir, "surge", "audit", "*", "audit.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(audit)).To(BeNumerically(">=", 3), "an audit log of every control plane in the evidence")

	raw, err := os.ReadFile(filepath.Join(out, report.ResultsFile))
	g.Expect(err).NotTo(HaveOccurred(), "certify left no results")
	var res report.Results
	g.Expect(json.Unmarshal(raw, &res)).To(Succeed())
	var exit *exec.ExitError
	g.Expect(errors.As(runErr, &exit)).To(BeTrue(), "certify of a broken build must exit non-zero, not %v", runErr)
	g.Expect(exit.ExitCode()).To(Equal(1), "a failed certification exits 1")
	g.Expect(res.Outcome).To(Equal(promise.Fail))
	g.Expect(res.Images[1].FeatureGates).To(HaveKeyWithValue("UnknownVersionInteroperabilityProxy", false), "results.json records the configuration certified")
	g.Expect(res.Runs).To(HaveLen(1))
	for _, p := range res.Runs[0].Promises {
		g.Expect(strings.ToLower(p.Reason)).NotTo(ContainSubstring("permission denied"), "%s judged as %s", p.ID, user)
		switch {
		case p.Outcome == promise.NotSelected:
		case slices.Contains(brokenPromises, p.ID):
			t.Logf("%s %s: %s", p.ID, p.Outcome, p.Reason)
			g.Expect(p.Outcome).To(Equal(promise.Fail), "%s with the newer apiservers' proxy off", p.ID)
			g.Expect(p.Reason).NotTo(BeEmpty())
		default:
			// Judged over the whole run whatever is selected: never a pass
			// bought by the control, and shown, not asserted.
			t.Logf("also judged: %s %s %s", p.ID, p.Outcome, p.Reason)
		}
	}
	g.Expect(res.Coverage.Judged).To(BeNumerically("<", res.Coverage.Promises), "the headline says how little was judged")
}
