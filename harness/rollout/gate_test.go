package rollout

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
)

// The proxy's gate in a ClusterConfiguration follows the version the
// cluster moves to, in both kubeadm APIs' shapes, other gates kept, and
// only where the proxy is on.
func TestSetProxyGate(t *testing.T) {
	v135, v136 := version.MustParse("v1.35.4"), version.MustParse("v1.36.3")
	for _, tc := range []struct {
		name    string
		in      string
		to      version.Version
		changed bool
		want    string // the apiServer section after, as YAML
	}{
		{"v1beta4, to 1.36: unset", `{"apiServer":{"extraArgs":[{"name":"feature-gates","value":"UnknownVersionInteroperabilityProxy=true"},{"name":"peer-ca-file","value":"/ca"}]}}`,
			v136, true, `{"extraArgs":[{"name":"peer-ca-file","value":"/ca"}]}`},
		{"v1beta4, back to 1.35: set", `{"apiServer":{"extraArgs":[{"name":"peer-ca-file","value":"/ca"}]}}`,
			v135, true, `{"extraArgs":[{"name":"peer-ca-file","value":"/ca"},{"name":"feature-gates","value":"UnknownVersionInteroperabilityProxy=true"}]}`},
		{"v1beta4, other gates kept", `{"apiServer":{"extraArgs":[{"name":"feature-gates","value":"A=true,UnknownVersionInteroperabilityProxy=true"},{"name":"peer-ca-file","value":"/ca"}]}}`,
			v136, true, `{"extraArgs":[{"name":"feature-gates","value":"A=true"},{"name":"peer-ca-file","value":"/ca"}]}`},
		{"v1beta4, already right", `{"apiServer":{"extraArgs":[{"name":"feature-gates","value":"UnknownVersionInteroperabilityProxy=true"},{"name":"peer-ca-file","value":"/ca"}]}}`,
			v135, false, `{"extraArgs":[{"name":"feature-gates","value":"UnknownVersionInteroperabilityProxy=true"},{"name":"peer-ca-file","value":"/ca"}]}`},
		{"v1beta3 map, to 1.36", `{"apiServer":{"extraArgs":{"feature-gates":"UnknownVersionInteroperabilityProxy=true","peer-ca-file":"/ca"}}}`,
			v136, true, `{"extraArgs":{"peer-ca-file":"/ca"}}`},
		{"v1beta3 map, to 1.35", `{"apiServer":{"extraArgs":{"feature-gates":"A=false","peer-ca-file":"/ca"}}}`,
			v135, true, `{"extraArgs":{"feature-gates":"A=false,UnknownVersionInteroperabilityProxy=true","peer-ca-file":"/ca"}}`},
		{"no proxy: left alone", `{"apiServer":{"extraArgs":[{"name":"feature-gates","value":"UnknownVersionInteroperabilityProxy=true"}]}}`,
			v136, false, `{"extraArgs":[{"name":"feature-gates","value":"UnknownVersionInteroperabilityProxy=true"}]}`},
	} {
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(tc.in), &cfg); err != nil {
			t.Fatal(err)
		}
		changed := setProxyGate(cfg, tc.to)
		got, _ := yaml.Marshal(cfg["apiServer"])
		var want map[string]any
		_ = yaml.Unmarshal([]byte(tc.want), &want)
		wantYAML, _ := yaml.Marshal(want)
		if changed != tc.changed || string(got) != string(wantYAML) {
			t.Errorf("%s: changed %v, apiServer\n%s\nwant changed %v,\n%s", tc.name, changed, got, tc.changed, wantYAML)
		}
	}
}

// A distribution's gates for one version are set when the cluster moves
// to it and dropped when it moves back; they win over the proxy's own,
// and with the proxy's gate off there is no --peer-ca-file (which
// kube-apiserver refuses then), with it back the cluster's peer CA.
func TestSetGatesByVersion(t *testing.T) {
	v135, v136 := version.MustParse("v1.35.4"), version.MustParse("v1.36.3")
	off := map[string]map[string]bool{"v1.36.3": {proxyGate: false}}
	cfg := map[string]any{"apiServer": map[string]any{"extraArgs": []any{
		map[string]any{"name": "feature-gates", "value": "A=true,UnknownVersionInteroperabilityProxy=true"},
		map[string]any{"name": "peer-ca-file", "value": cluster.PeerCAFile}}}}
	arg := func(name string) string { s, _ := extraArgs{cfg["apiServer"].(map[string]any)}.get(name); return s }
	if !setGates(cfg, v136, off) || arg("feature-gates") != "A=true,UnknownVersionInteroperabilityProxy=false" || arg("peer-ca-file") != "" {
		t.Errorf("to 1.36 with the proxy's gate off: gates %q, peer CA %q", arg("feature-gates"), arg("peer-ca-file"))
	}
	if !setGates(cfg, v135, off) || arg("feature-gates") != "A=true,UnknownVersionInteroperabilityProxy=true" || arg("peer-ca-file") != cluster.PeerCAFile {
		t.Errorf("back to 1.35: gates %q, peer CA %q", arg("feature-gates"), arg("peer-ca-file"))
	}
	if setGates(cfg, v135, off) {
		t.Error("a second move to the same version changed the configuration")
	}
}
