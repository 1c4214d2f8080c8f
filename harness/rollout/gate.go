package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
)

// proxyGate is the Mixed Version Proxy's feature gate: alpha and off
// below 1.36, Beta and on by default from 1.36. A cluster made below 1.36
// with the proxy on has it set in its ClusterConfiguration (kind's
// cluster-wide feature gates); the apiservers kubeadm deploys later read
// it there.
const proxyGate = cluster.ProxyGate

// setProxyGate makes the apiserver's feature gates in cfg, a
// ClusterConfiguration of either kubeadm API (extraArgs a map in v1beta3,
// a list of name/value pairs in v1beta4), fit the apiservers of version v
// where the proxy is on (a --peer-ca-file): the gate set to true below
// 1.36, where it must be, and left out from 1.36, so that those servers
// run on its Beta default - the default a user's cluster has. It says
// whether cfg changed.
func setProxyGate(cfg map[string]any, v version.Version) bool { return setGates(cfg, v, nil) }

// setGates is setProxyGate, then the gates a distribution gives the
// apiservers of each version (byVersion, by version string: the
// cluster's Spec.VersionFeatureGates) set for v's: a gate named for any
// version is removed first, so moving back to a version without it
// drops it. Where some version names the proxy's gate, the proxy is the
// distribution's to switch: a version with it off runs without
// --peer-ca-file (kube-apiserver refuses the flag with the gate off),
// the others with the cluster's peer CA.
func setGates(cfg map[string]any, v version.Version, byVersion map[string]map[string]bool) bool {
	api, _ := cfg["apiServer"].(map[string]any)
	if api == nil {
		return false
	}
	args := extraArgs{api}
	given := byVersion[v.String()]
	changed := false
	managed := false // some version names the proxy's gate
	for _, gates := range byVersion {
		_, named := gates[proxyGate]
		managed = managed || named
	}
	if managed {
		ca, had := args.get("peer-ca-file")
		if on, ok := given[proxyGate]; ok && !on {
			if had {
				args.set("peer-ca-file", "")
				changed = true
			}
		} else if !had || ca != cluster.PeerCAFile {
			args.set("peer-ca-file", cluster.PeerCAFile)
			changed = true
		}
	}
	_, proxied := args.get("peer-ca-file")
	owned := map[string]bool{}
	if proxied {
		owned[proxyGate] = true
	}
	for _, gates := range byVersion {
		for g := range gates {
			owned[g] = true
		}
	}
	if len(owned) == 0 {
		return changed
	}
	raw, _ := args.get("feature-gates")
	var gates []string
	for _, g := range strings.Split(raw, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(g), "=")
		if g = strings.TrimSpace(g); g != "" && !owned[name] {
			gates = append(gates, g)
		}
	}
	if _, overridden := given[proxyGate]; proxied && !overridden && v.Major() == 1 && v.Minor() < 36 {
		gates = append(gates, proxyGate+"=true")
	}
	names := slices.Sorted(maps.Keys(given))
	for _, g := range names {
		gates = append(gates, fmt.Sprintf("%s=%t", g, given[g]))
	}
	want := strings.Join(gates, ",")
	if want == raw {
		return changed
	}
	args.set("feature-gates", want)
	return true
}

// setClusterProxyGate moves the proxy's gate in the cluster's
// ClusterConfiguration to fit v (setProxyGate), ahead of a `kubeadm
// upgrade apply` to it, which keeps the apiserver's extra arguments.
func setClusterProxyGate(ctx context.Context, c *cluster.Cluster, v version.Version) error {
	cfg, save, err := clusterConfiguration(ctx, c)
	if err != nil {
		return err
	}
	if !setGates(cfg, v, c.VersionFeatureGates()) {
		return nil
	}
	return save(cfg)
}

// extraArgs reads and writes the extraArgs of a component's section of a
// ClusterConfiguration, in the shape it has; an empty value removes the
// argument. A section without extraArgs is left alone.
type extraArgs struct{ section map[string]any }

func (a extraArgs) get(name string) (string, bool) {
	switch args := a.section["extraArgs"].(type) {
	case map[string]any:
		v, ok := args[name]
		s, _ := v.(string)
		return s, ok
	case []any:
		for _, item := range args {
			if m, _ := item.(map[string]any); m != nil && m["name"] == name {
				s, _ := m["value"].(string)
				return s, true
			}
		}
	}
	return "", false
}

func (a extraArgs) set(name, value string) {
	switch args := a.section["extraArgs"].(type) {
	case map[string]any:
		if value == "" {
			delete(args, name)
		} else {
			args[name] = value
		}
	case []any:
		i := slices.IndexFunc(args, func(item any) bool {
			m, _ := item.(map[string]any)
			return m != nil && m["name"] == name
		})
		switch {
		case i >= 0 && value == "":
			a.section["extraArgs"] = slices.Delete(args, i, i+1)
		case i >= 0:
			args[i].(map[string]any)["value"] = value
		case value != "":
			a.section["extraArgs"] = append(args, map[string]any{"name": name, "value": value})
		}
	}
}
