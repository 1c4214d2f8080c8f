// Package distribution proves that a distribution can certify its own build: the
// test makes a vendor's release itself, with no network but the Go module
// proxy (Kubernetes v1.36.3 built to report v1.36.3-acme.1, packed in the
// layout of kubernetes-server-linux-amd64.tar.gz), then runs `skewer
// certify --from v1.35.4 --kubernetes to=TARBALL --strategy surge` as a
// user would, and reads in results.json, summary.md and report.html that
// the build was certified for what it is - its suffix, its tarball's and
// binaries' sha256, the version its apiservers answered with - and on the
// whole catalogue: every promise judged, the proxy's among them. It is
// make e2e's certification (SKEWER_CERTIFY_OUT says where its report goes).
package distribution

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/source"
)

var (
	// The pair: make e2e's FROM and TO when it gives them.
	from   = version.MustParse(envOr("SKEWER_FROM", "v1.35.4"))
	module = version.MustParse(envOr("SKEWER_TO", "v1.36.3"))
	vendor = version.MustParse(module.String() + "-acme.1")
	// binaries are the server release's, as kubernetes/server/bin holds them.
	binaries = []string{"kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}
)

func TestCertifyAVendorsRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a Kubernetes build and certifies it on a kind cluster: not with -short")
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
	// The build (~600 MB) is not evidence: only the report and what it
	// rests on stay in the artifacts.
	work := t.TempDir()
	out := envOr("SKEWER_CERTIFY_OUT", filepath.Join(artifacts, "certify-vendor"))
	g.Expect(os.RemoveAll(out)).To(Succeed())

	// The vendor's build: its binaries report the suffix.
	bin := filepath.Join(work, "build")
	b := &nodeimage.Builder{Out: testWriter{t}}
	g.Expect(b.KubernetesBinaries(ctx, module, vendor, bin)).To(Succeed())
	tarball := filepath.Join(work, "kubernetes-server-linux-amd64.tar.gz")
	sums := packRelease(t, bin, tarball)

	skewer := filepath.Join(work, "skewer")
	build := exec.CommandContext(ctx, "go", "build", "-o", skewer, "./cmd/skewer")
	build.Dir = root
	built, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go build: %s", built)

	// As a user would: one command, the release given for the newer side.
	// By surge: the mixed window, where every proxy promise is judged.
	certify := exec.CommandContext(ctx, skewer, "certify", "--from", from.String(), "--kubernetes", "to="+tarball,
		"--strategy", "surge", "--strict="+strconv.FormatBool(os.Getenv("SKEWER_STRICT") == "true"), "--name", "skewer-vendor", "--out", out)
	certify.Stdout, certify.Stderr = os.Stdout, os.Stderr
	// Ctrl-C reaches skewer as an interrupt, so it deletes its cluster.
	certify.Cancel = func() error { return certify.Process.Signal(os.Interrupt) }
	certify.WaitDelay = 2 * time.Minute
	runErr := certify.Run()
	t.Logf("skewer certify: %v; results in %s", runErr, out)

	raw, err := os.ReadFile(filepath.Join(out, report.ResultsFile))
	g.Expect(err).NotTo(HaveOccurred(), "certify left no results")
	var res report.Results
	g.Expect(json.Unmarshal(raw, &res)).To(Succeed())
	g.Expect(res.To).To(Equal(vendor.String()), "the pair's newer side is the version the binaries report")
	g.Expect(res.Images).To(HaveLen(2))
	given := res.Images[1]
	g.Expect(given.Version).To(Equal(vendor.String()))
	g.Expect(given.Given).NotTo(BeNil(), "results.json says what was given")
	g.Expect(given.Given.Kind).To(Equal("release-tarball"))
	g.Expect(given.Given.Path).To(Equal(tarball))
	g.Expect(given.Given.SHA256).To(Equal(sums["(tarball)"]))
	for _, name := range binaries {
		g.Expect(given.Given.Binaries).To(HaveKeyWithValue(name, sums[name]), "the sha256 of %s", name)
	}
	g.Expect(res.Images[0].Given).To(BeNil(), "v1.35.4 is skewer's own build")

	// What the running cluster said, not only what was given.
	g.Expect(res.Runs).To(HaveLen(1))
	var apiservers []string
	for _, c := range res.Runs[0].Components["end"] {
		if c.APIServer != "" {
			apiservers = append(apiservers, c.APIServer)
		}
	}
	g.Expect(apiservers).To(HaveLen(3))
	g.Expect(apiservers).To(HaveEach(vendor.String()), "every apiserver answers /version with the vendor's version at the end")
	// Judged on the whole catalogue: a build whose mixed window hid the
	// proxy's promises (not applicable) would pass on less than upstream.
	// One exception, the machine's and not the build's: a kernel without
	// nftables' queue expression (these CI machines') refuses the
	// NetworkPolicy engine's rules, which the verdict must say it saw.
	judged := res.Coverage.Judged
	for _, v := range res.Runs[0].Promises {
		if v.ID == "sidecar.network-policy" && v.Outcome == promise.NotApplicable && strings.Contains(v.Reason, "could not install its nftables rules") {
			judged++
		}
	}
	g.Expect(judged).To(Equal(res.Coverage.Promises), "every promise judged on the vendor's build: %+v", res.Coverage)

	summary, err := os.ReadFile(filepath.Join(out, report.SummaryFile))
	g.Expect(err).NotTo(HaveOccurred())
	html, err := os.ReadFile(filepath.Join(out, report.HTMLFile))
	g.Expect(err).NotTo(HaveOccurred())
	for _, text := range []string{string(summary), string(html)} {
		g.Expect(text).To(ContainSubstring(vendor.String()))
		g.Expect(text).To(ContainSubstring(sums["(tarball)"]))
		g.Expect(text).To(ContainSubstring(sums["kube-apiserver"]))
	}
	g.Expect(runErr).NotTo(HaveOccurred(), "certify of %s -> %s: %s", from, vendor, res.Summary())
}

// packRelease writes dir's binaries into tarball under kubernetes/server/bin,
// as a server release holds them, and returns the sha256 of each and of
// the tarball.
func packRelease(t *testing.T, dir, tarball string) map[string]string {
	t.Helper()
	g := NewWithT(t)
	f, err := os.Create(tarball)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	sums := map[string]string{}
	for _, d := range []string{"kubernetes/", "kubernetes/server/", "kubernetes/server/bin/"} {
		g.Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755})).To(Succeed())
	}
	for _, name := range binaries {
		body, err := os.ReadFile(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "kubernetes/server/bin/" + name, Mode: 0o755, Size: int64(len(body))})).To(Succeed())
		_, err = tw.Write(body)
		g.Expect(err).NotTo(HaveOccurred())
		sum := sha256.Sum256(body)
		sums[name] = hex.EncodeToString(sum[:])
	}
	g.Expect(tw.Close()).To(Succeed())
	g.Expect(gz.Close()).To(Succeed())
	g.Expect(f.Close()).To(Succeed())
	r, err := os.Open(tarball)
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	h := sha256.New()
	_, err = io.Copy(h, r)
	g.Expect(err).NotTo(HaveOccurred())
	sums["(tarball)"] = hex.EncodeToString(h.Sum(nil))
	return sums
}

// envOr is the environment's value of name, or def where it is unset.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// testWriter sends the builder's progress lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
