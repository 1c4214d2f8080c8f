// Package cluster is a kind-backed Kubernetes cluster: a spec of its
// topology, versions, gates and audit policy; creation and deletion through
// kind's Go library; node selectors; and a client per apiserver.
package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/source"
)

// Spec describes a cluster. Profiles in clusters/*.yaml are Specs.
type Spec struct {
	// Name of the kind cluster.
	Name string `json:"name"`
	// ControlPlanes and Workers count the nodes of each role.
	ControlPlanes int `json:"controlPlanes"`
	Workers       int `json:"workers"`
	// Version is the Kubernetes version of every node unless the per-node
	// lists say otherwise.
	Version version.Version `json:"version"`
	// ControlPlaneVersions and WorkerVersions give node i its own version;
	// an empty entry means Version. The first control plane bootstraps the
	// cluster and sets its ClusterConfiguration version.
	ControlPlaneVersions []version.Version `json:"controlPlaneVersions,omitempty"`
	WorkerVersions       []version.Version `json:"workerVersions,omitempty"`
	// FeatureGates for every component, RuntimeConfig and APIServerArgs for
	// every apiserver.
	FeatureGates  map[string]bool   `json:"featureGates,omitempty"`
	RuntimeConfig map[string]string `json:"runtimeConfig,omitempty"`
	APIServerArgs map[string]string `json:"apiServerArgs,omitempty"`
	// ControlPlaneAPIServerArgs adds flags to the apiserver of control plane i
	// only (through kubeadm's patches), e.g. runtime-config to turn an API off
	// on one server.
	ControlPlaneAPIServerArgs []map[string]string `json:"controlPlaneAPIServerArgs,omitempty"`
	// VersionFeatureGates are feature gates of the apiservers of one
	// version only, by version string: a distribution's own configuration
	// of its build (e.g. the proxy's gate off). A rollout sets them in
	// ClusterConfiguration as it moves the cluster's version, so the
	// apiservers kubeadm deploys at that version run them.
	VersionFeatureGates map[string]map[string]bool `json:"versionFeatureGates,omitempty"`
	// MixedVersionProxy turns the Mixed Version Proxy on in every apiserver
	// (default true): --peer-ca-file, and on 1.35 the feature gate.
	MixedVersionProxy *bool `json:"mixedVersionProxy,omitempty"`
	// AuditPolicy is the path of the audit policy every apiserver uses;
	// relative paths are relative to the profile. Empty means the built-in
	// policy (every request at Metadata level).
	AuditPolicy string `json:"auditPolicy,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// LoadProfile reads a Spec from a YAML file; unknown fields are an error.
func LoadProfile(path string) (*Spec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read profile: %w", err)
	}
	var s Spec
	if err := yaml.UnmarshalStrict(raw, &s); err != nil {
		return nil, fmt.Errorf("malformed profile %s: %w", path, err)
	}
	if s.AuditPolicy != "" && !filepath.IsAbs(s.AuditPolicy) {
		s.AuditPolicy = filepath.Join(filepath.Dir(path), s.AuditPolicy)
	}
	return &s, nil
}

// ProxyEnabled says whether the Mixed Version Proxy is on.
func (s *Spec) ProxyEnabled() bool { return s.MixedVersionProxy == nil || *s.MixedVersionProxy }

// nodeVersion returns the version of node i of a role, from its list or Version.
func nodeVersion(list []version.Version, i int, def version.Version) version.Version {
	if i < len(list) && !list[i].IsZero() {
		return list[i]
	}
	return def
}

// ControlPlaneVersion is the version of control plane i.
func (s *Spec) ControlPlaneVersion(i int) version.Version {
	return nodeVersion(s.ControlPlaneVersions, i, s.Version)
}

// WorkerVersion is the version of worker i.
func (s *Spec) WorkerVersion(i int) version.Version {
	return nodeVersion(s.WorkerVersions, i, s.Version)
}

// Versions lists every distinct node version, control planes first.
func (s *Spec) Versions() []version.Version {
	var out []version.Version
	add := func(v version.Version) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for i := 0; i < s.ControlPlanes; i++ {
		add(s.ControlPlaneVersion(i))
	}
	for i := 0; i < s.Workers; i++ {
		add(s.WorkerVersion(i))
	}
	return out
}

// Validate checks the spec, including Kubernetes' version skew policy:
// control planes at most one minor apart, and no kubelet newer than an
// apiserver it may talk to (a worker reaches every apiserver through the
// load balancer; a control plane's kubelet talks to its own apiserver).
func (s *Spec) Validate() error {
	var errs []string
	if !nameRE.MatchString(s.Name) || len(s.Name) > 50 {
		errs = append(errs, fmt.Sprintf("invalid cluster name %q: lowercase letters, digits and '-'", s.Name))
	}
	if s.ControlPlanes < 1 {
		errs = append(errs, "a cluster needs at least one control plane")
	}
	if s.Workers < 0 {
		errs = append(errs, "workers cannot be negative")
	}
	if len(s.ControlPlaneVersions) > s.ControlPlanes || len(s.WorkerVersions) > s.Workers {
		errs = append(errs, "more per-node versions than nodes")
	}
	if len(s.ControlPlaneAPIServerArgs) > s.ControlPlanes {
		errs = append(errs, "more per-apiserver flag sets than control planes")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	var cps []version.Version
	for i := 0; i < s.ControlPlanes; i++ {
		v := s.ControlPlaneVersion(i)
		if v.IsZero() {
			return fmt.Errorf("control plane %d has no version (set version, or controlPlaneVersions[%d])", i, i)
		}
		cps = append(cps, v)
	}
	oldest, newest := cps[0], cps[0]
	for _, v := range cps {
		if v.Less(oldest) {
			oldest = v
		}
		if newest.Less(v) {
			newest = v
		}
	}
	if newest.MinorsApart(oldest) > 1 {
		return fmt.Errorf("version skew not allowed: control planes at %s and %s are more than one minor apart", oldest, newest)
	}
	for i := 0; i < s.Workers; i++ {
		v := s.WorkerVersion(i)
		switch {
		case v.IsZero():
			return fmt.Errorf("worker %d has no version (set version, or workerVersions[%d])", i, i)
		case oldest.Less(v):
			return fmt.Errorf("version skew not allowed: worker %d's kubelet %s is newer than apiserver %s", i, v, oldest)
		case v.Major() != newest.Major() || v.Minor()+3 < newest.Minor():
			return fmt.Errorf("version skew not allowed: worker %d's kubelet %s is more than three minors older than apiserver %s", i, v, newest)
		}
	}
	return nil
}

// FindProfile finds a profile by name (clusters/<name>.yaml in skewer's
// checkout) or takes it as a path.
func FindProfile(profile string) (string, error) {
	if strings.ContainsAny(profile, "/.") {
		return profile, nil
	}
	root, err := source.Root()
	if err != nil {
		return "", fmt.Errorf("no profile %q: %w", profile, err)
	}
	p := filepath.Join(root, "clusters", profile+".yaml")
	if _, err := os.Stat(p); err != nil {
		known, _ := filepath.Glob(filepath.Join(root, "clusters", "*.yaml"))
		for i, k := range known {
			known[i] = strings.TrimSuffix(filepath.Base(k), ".yaml")
		}
		sort.Strings(known)
		return "", fmt.Errorf("no profile %q: known profiles are %s, or give a profile file's path", profile, strings.Join(known, ", "))
	}
	return p, nil
}
