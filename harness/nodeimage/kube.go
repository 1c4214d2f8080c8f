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

// buildInfo is what a Kubernetes build says of itself: the variables
// hack/lib/version.sh sets.
type buildInfo struct {
	version   version.Version
	commit    string // the git commit; a module from the proxy has none, so it says where it came from
	treeState string // clean, dirty, or archive (a module from the proxy)
	date      string
}

// moduleBuild is the build info of Kubernetes from the module proxy,
// reporting v; the module's publication time stands in for a build date,
// so that the same version always builds the same bytes.
func moduleBuild(v version.Version, published string) buildInfo {
	if t, err := time.Parse(time.RFC3339, published); err == nil {
		published = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	return buildInfo{version: v, commit: "go-module-proxy-k8s.io-kubernetes-" + v.String(), treeState: "archive", date: strings.TrimSpace(published)}
}

// ldflags set the version variables the way hack/lib/version.sh does, so
// /version, kubeadm and kubelet report the build.
func (i buildInfo) ldflags() []string {
	vars := map[string]string{
		"gitVersion":   i.version.String(),
		"gitMajor":     fmt.Sprint(i.version.Major()),
		"gitMinor":     fmt.Sprint(i.version.Minor()),
		"gitCommit":    i.commit,
		"gitTreeState": i.treeState,
		"buildDate":    i.date,
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, name := range []string{"gitVersion", "gitMajor", "gitMinor", "gitCommit", "gitTreeState", "buildDate"} {
			flags = append(flags, fmt.Sprintf("-X %s.%s=%s", pkg, name, vars[name]))
		}
	}
	return flags
}

// kubeBuildTags are the tags Kubernetes' own build uses.
var kubeBuildTags = []string{"selinux", "notest", "grpcnotrace"}

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
	pkgs := make([]string, len(kubeCommands))
	for i, c := range kubeCommands {
		pkgs[i] = "k8s.io/kubernetes/cmd/" + c
	}
	return p.goBuild(ctx, goBuild{
		Name:     "kubernetes-" + gv,
		Require:  map[string]string{"k8s.io/kubernetes": gv},
		Replace:  replace,
		Packages: pkgs,
		Tags:     kubeBuildTags,
		LDFlags:  moduleBuild(gitVersion, info.Time).ldflags(),
		Out:      out,
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
	return p.step(ctx, fmt.Sprintf("Kubernetes %s binaries reporting %s", v, gitVersion), func(ctx context.Context) (bool, error) {
		return false, p.buildKubernetes(ctx, gitVersion, dir)
	})
}

// releaseBinaries copies a vendor's binaries into the cache, so what the
// node image is built from cannot change under it; a source tree is built
// there.
func (p *plan) releaseBinaries(ctx context.Context) (bool, error) {
	p.kubeKey = cacheKey("release", p.rel.Key())
	p.kubeDir = p.b.cacheDir("bin", "release-"+tag(p.v)+"-"+p.kubeKey)
	if p.rel.tree != "" {
		cached, err := p.cachedDir(p.kubeDir, func(out string) error { return p.rel.build(ctx, out, p.b.cacheDir("releases")) })
		if err != nil {
			return false, err
		}
		return cached, p.rel.built(ctx, p.kubeDir)
	}
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
