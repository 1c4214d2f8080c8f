package nodeimage

import (
	"context"
	"fmt"
	"strings"
	"time"
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
	gv := p.gitVersion()
	p.kubeKey = cacheKey("kubernetes", gv)
	p.kubeDir = p.b.cacheDir("bin", "kubernetes-"+gv+"-"+p.kubeKey)
	return p.cachedDir(p.kubeDir, func(out string) error {
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
			LDFlags: kubeVersionLDFlags(gv, fmt.Sprint(p.v.Major()), fmt.Sprint(p.v.Minor()),
				strings.TrimSpace(buildDate)),
			Out: out,
		})
	})
}
