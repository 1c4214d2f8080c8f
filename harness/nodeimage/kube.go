package nodeimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/run"
)

// kubeCommands are the Kubernetes binaries a node image carries: kubeadm,
// kubelet and kubectl on the node, the rest as component images.
var kubeCommands = []string{
	"kubeadm", "kubelet", "kubectl",
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy",
}

// kubeVersionLDFlags sets the version variables the way hack/lib/version.sh
// does, so /version, kubeadm and kubelet report the version that was built.
// A module from the proxy has no git hash; gitCommit says where it came from.
func kubeVersionLDFlags(gitVersion, major, minor, buildDate string) []string {
	vars := map[string]string{
		"gitVersion":   gitVersion,
		"gitMajor":     major,
		"gitMinor":     minor,
		"gitCommit":    "go-module-proxy-k8s.io-kubernetes-" + gitVersion,
		"gitTreeState": "archive",
		"buildDate":    buildDate,
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, name := range []string{"gitVersion", "gitMajor", "gitMinor", "gitCommit", "gitTreeState", "buildDate"} {
			flags = append(flags, fmt.Sprintf("-X %s.%s=%s", pkg, name, vars[name]))
		}
	}
	return flags
}

func (p *plan) kubeBinaries(ctx context.Context) (bool, error) {
	if p.rel != nil {
		return p.releaseBinaries(ctx)
	}
	gv := p.gitVersion()
	p.kubeKey = cacheKey("kubernetes", gv)
	p.kubeDir = p.b.cacheDir("bin", "kubernetes-"+gv+"-"+p.kubeKey)
	return p.cachedDir(p.kubeDir, func(out string) error { return p.buildKubernetes(ctx, p.v, out) })
}

// buildKubernetes builds the Kubernetes binaries of the module p.v into
// out, reporting the version gitVersion.
func (p *plan) buildKubernetes(ctx context.Context, gitVersion version.Version, out string) error {
	gv := p.v.String()
	info, err := downloadModule(ctx, "k8s.io/kubernetes", gv)
	if err != nil {
		return err
	}
	staging, err := requiredPlaceholders(info.GoMod)
	if err != nil {
		return fmt.Errorf("failed to read k8s.io/kubernetes go.mod: %w", err)
	}
	stagingVersion := fmt.Sprintf("v0.%d.%d", p.v.Minor(), p.v.Patch())
	replace := map[string]string{}
	for _, m := range staging {
		replace[m] = stagingVersion
	}
	// The module's publication time stands in for a build date, so that
	// the same version always builds the same bytes.
	buildDate := info.Time
	if t, err := time.Parse(time.RFC3339, info.Time); err == nil {
		buildDate = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	pkgs := make([]string, len(kubeCommands))
	for i, c := range kubeCommands {
		pkgs[i] = "k8s.io/kubernetes/cmd/" + c
	}
	return p.goBuild(ctx, goBuild{
		Name:     "kubernetes-" + gv,
		Require:  map[string]string{"k8s.io/kubernetes": gv},
		Replace:  replace,
		Packages: pkgs,
		Tags:     []string{"selinux", "notest", "grpcnotrace"},
		LDFlags: kubeVersionLDFlags(gitVersion.String(), fmt.Sprint(gitVersion.Major()), fmt.Sprint(gitVersion.Minor()),
			strings.TrimSpace(buildDate)),
		Out: out,
	})
}

// KubernetesBinaries builds Kubernetes v from the Go module proxy into
// dir, as a vendor's build of it would be: binaries that report
// gitVersion (v with the vendor's suffix, e.g. v1.36.3-acme.2). It is
// what a test of a vendor's release starts from; nothing is cached.
func (b *Builder) KubernetesBinaries(ctx context.Context, v, gitVersion version.Version, dir string) error {
	if gitVersion.Major() != v.Major() || gitVersion.Minor() != v.Minor() || gitVersion.Patch() != v.Patch() {
		return fmt.Errorf("%s is not a build of %s: they differ before the suffix", gitVersion, v)
	}
	p := &plan{b: b, v: v}
	return b.step(ctx, fmt.Sprintf("Kubernetes %s binaries reporting %s", v, gitVersion), func(ctx context.Context) (bool, error) {
		return false, p.buildKubernetes(ctx, gitVersion, dir)
	})
}

// releaseBinaries copies a vendor's binaries into the cache, so what the
// node image is built from cannot change under it.
func (p *plan) releaseBinaries(ctx context.Context) (bool, error) {
	p.kubeKey = cacheKey("release", p.rel.Key())
	p.kubeDir = p.b.cacheDir("bin", "release-"+tag(p.v)+"-"+p.kubeKey)
	return p.cachedDir(p.kubeDir, func(out string) error {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		for _, c := range kubeCommands {
			if err := run.Command("cp", filepath.Join(p.rel.dir, c), filepath.Join(out, c)).Run(ctx); err != nil {
				return err
			}
			if sum, err := fileSHA256(filepath.Join(out, c)); err != nil || sum != p.rel.Binaries[c] {
				return fmt.Errorf("%s changed since it was read (sha256 %s, read as %s): %v", c, sum, p.rel.Binaries[c], err)
			}
		}
		return nil
	})
}
