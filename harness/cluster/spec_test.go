package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/skewer-k8s/skewer/harness/version"
)

func haSpec() *Spec {
	return &Spec{Name: "t", ControlPlanes: 3, Workers: 1, Version: version.MustParse("v1.35.4")}
}

func TestValidateEnforcesTheSkewPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Spec)
		want   string // "" means valid
	}{
		{"uniform", func(*Spec) {}, ""},
		{"one minor apart", func(s *Spec) { s.ControlPlaneVersions = vs("v1.35.4", "v1.35.4", "v1.36.3") }, ""},
		{"two minors apart", func(s *Spec) { s.ControlPlaneVersions = vs("v1.35.4", "v1.37.2") }, "more than one minor apart"},
		{"worker newer than an apiserver", func(s *Spec) { s.WorkerVersions = vs("v1.36.3") }, "newer than apiserver v1.35.4"},
		{"no version", func(s *Spec) { s.Version = version.Version{} }, "control plane 0 has no version"},
		{"bad name", func(s *Spec) { s.Name = "Bad_Name" }, "invalid cluster name"},
		{"no control plane", func(s *Spec) { s.ControlPlanes = 0 }, "at least one control plane"},
		{"too many versions", func(s *Spec) { s.WorkerVersions = vs("v1.35.4", "v1.35.4") }, "more per-node versions than nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := haSpec()
			tc.mutate(s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestLoadProfileRejectsUnknownFields(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.yaml")
	os.WriteFile(p, []byte("name: x\ncontrolPlanes: 1\nwokers: 3\n"), 0o644)
	if _, err := LoadProfile(p); err == nil || !strings.Contains(err.Error(), "malformed profile") {
		t.Fatalf("want a malformed-profile error, got %v", err)
	}
}

func TestShippedProfilesAreValid(t *testing.T) {
	paths, _ := filepath.Glob("../../clusters/*.yaml")
	if len(paths) == 0 {
		t.Fatal("no profiles found")
	}
	for _, p := range paths {
		s, err := LoadProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestKindConfigTurnsTheProxyAndAuditOnForEveryAPIServer(t *testing.T) {
	s := haSpec()
	s.ControlPlaneVersions = vs("v1.35.4", "v1.35.4", "v1.36.3")
	cfg, err := kindConfig(s, Host{CgroupV1: true, RestrictOOMScoreAdj: true}, layout{"/state"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Nodes) != 4 || cfg.Nodes[2].Image != "skewer.local/node:v1.36.3" || cfg.Nodes[3].Role != v1alpha4.WorkerRole {
		t.Fatalf("nodes = %+v", cfg.Nodes)
	}
	if !cfg.FeatureGates["UnknownVersionInteroperabilityProxy"] {
		t.Error("1.35 apiservers need the proxy's feature gate")
	}
	if len(cfg.KubeadmConfigPatchesJSON6902) != 2 {
		t.Fatalf("want one ClusterConfiguration patch per kubeadm API, got %d", len(cfg.KubeadmConfigPatchesJSON6902))
	}
	for _, p := range cfg.KubeadmConfigPatchesJSON6902 {
		var ops []map[string]any
		if err := json.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatal(err)
		}
		all := p.Patch
		for _, want := range []string{"peer-ca-file", "/etc/kubernetes/pki/ca.crt", "audit-policy-file", AuditLogFile, "extraVolumes"} {
			if !strings.Contains(all, want) {
				t.Errorf("%s patch lacks %q: %s", p.Version, want, all)
			}
		}
	}
	if !strings.Contains(strings.Join(cfg.KubeadmConfigPatches, ""), "failCgroupV1: false\ncgroupDriver: cgroupfs") {
		t.Error("a cgroup v1 host needs failCgroupV1: false, and the cgroupfs driver")
	}
	if !strings.Contains(strings.Join(cfg.ContainerdConfigPatches, ""), "SystemdCgroup = false") {
		t.Error("a cgroup v1 host's runtime uses the cgroupfs driver")
	}
	if !strings.Contains(strings.Join(cfg.ContainerdConfigPatches, ""), "restrict_oom_score_adj = true") {
		t.Error("a host refusing negative OOM scores needs restrict_oom_score_adj")
	}
	// Only the node at another version than the bootstrap one gets patches.
	if len(cfg.Nodes[0].KubeadmConfigPatches) != 0 || len(cfg.Nodes[2].KubeadmConfigPatches) != 2 {
		t.Errorf("kubeadm patches: node0 %v, node2 %v", cfg.Nodes[0].KubeadmConfigPatches, cfg.Nodes[2].KubeadmConfigPatches)
	}
	if !strings.Contains(cfg.Nodes[2].KubeadmConfigPatches[1], "kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration") {
		t.Errorf("a 1.36 node's join patch must use v1beta4: %q", cfg.Nodes[2].KubeadmConfigPatches[1])
	}
}

func TestKindConfigWithoutProxyLeavesPeerFlagsOut(t *testing.T) {
	s := haSpec()
	off := false
	s.MixedVersionProxy = &off
	cfg, err := kindConfig(s, Host{}, layout{"/state"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(cfg.ContainerdConfigPatches, ""), "SystemdCgroup") || strings.Contains(strings.Join(cfg.KubeadmConfigPatches, ""), "cgroupDriver") {
		t.Error("a cgroup v2 host keeps kind's systemd driver")
	}
	if strings.Contains(cfg.KubeadmConfigPatchesJSON6902[0].Patch, "peer-ca-file") || cfg.FeatureGates["UnknownVersionInteroperabilityProxy"] {
		t.Error("proxy off must set neither --peer-ca-file nor the gate")
	}
	if len(cfg.KubeadmConfigPatches) != 0 || len(cfg.ContainerdConfigPatches) != 1 {
		t.Errorf("a host that needs no adaptation gets none but the no-pull registry configuration: %q %q", cfg.KubeadmConfigPatches, cfg.ContainerdConfigPatches)
	}
}

// Nodes never pull: every node, worker included, mounts the registry
// configuration that fails a pull at once, and containerd reads it.
func TestEveryNodeFailsAPullAtOnce(t *testing.T) {
	dir := t.TempDir()
	s := haSpec()
	cfg, err := Prepare(s, Host{}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(cfg.ContainerdConfigPatches, ""), `config_path = "/etc/containerd/certs.d"`) {
		t.Errorf("containerd is not pointed at the registry configuration: %q", cfg.ContainerdConfigPatches)
	}
	for _, n := range cfg.Nodes {
		mounted := false
		for _, m := range n.ExtraMounts {
			if m.ContainerPath == registryHostsDir && m.Readonly {
				mounted = true
				hosts, err := os.ReadFile(filepath.Join(m.HostPath, "_default", "hosts.toml"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(hosts), `server = "http://127.0.0.1:1"`) {
					t.Errorf("_default/hosts.toml does not send pulls to a closed loopback port: %s", hosts)
				}
			}
		}
		if !mounted {
			t.Errorf("%s node does not mount %s: %+v", n.Role, registryHostsDir, n.ExtraMounts)
		}
	}
}

func TestStaticPodPatchesPinImagesAndAddFlags(t *testing.T) {
	files := staticPodPatches(version.MustParse("v1.36.3"), map[string]string{"runtime-config": "batch/v1=false"})
	if len(files) != 3 {
		t.Fatalf("want patches for apiserver, controller-manager and scheduler, got %v", files)
	}
	api := files["kube-apiserver+json.json"]
	for _, want := range []string{`"registry.k8s.io/kube-apiserver:v1.36.3"`, `"--runtime-config=batch/v1=false"`} {
		if !strings.Contains(api, want) {
			t.Errorf("apiserver patch %s lacks %s", api, want)
		}
	}
	if strings.Contains(files["kube-scheduler+json.json"], "runtime-config") {
		t.Error("apiserver flags must not reach the scheduler")
	}
}

func TestNextNodeNameNeverReusesOne(t *testing.T) {
	for _, tc := range []struct {
		role string
		used []string
		want string
	}{
		{RoleControlPlane, []string{"c-control-plane", "c-control-plane2", "c-control-plane3", "c-worker"}, "c-control-plane4"},
		{RoleControlPlane, []string{"c-control-plane", "c-control-plane2", "/state/audit/c-control-plane3"}, "c-control-plane4"},
		{RoleControlPlane, nil, "c-control-plane"},
		{RoleWorker, []string{"c-control-plane", "c-control-plane5", "c-worker", "c-worker2"}, "c-worker3"},
		{RoleWorker, []string{"c-control-plane"}, "c-worker"},
	} {
		if got := nextNodeName("c", tc.role, tc.used); got != tc.want {
			t.Errorf("nextNodeName(%s, %v) = %s, want %s", tc.role, tc.used, got, tc.want)
		}
	}
}

func TestProfileWithAMalformedVersionIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(p, []byte("name: x\ncontrolPlanes: 1\nversion: \"1.36\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadProfile(p)
	if err == nil || !strings.Contains(err.Error(), "invalid Kubernetes version") {
		t.Fatalf("LoadProfile: %v, want an invalid Kubernetes version", err)
	}
}

func vs(in ...string) []version.Version {
	out := make([]version.Version, len(in))
	for i, s := range in {
		out[i] = version.MustParse(s)
	}
	return out
}

// A node image given for a version starts every node of that version, in
// the kind config and, kept in the cluster's directory, for a rollout in a
// later process; other versions stay skewer's builds.
func TestGivenNodeImagesStartTheirNodes(t *testing.T) {
	s := haSpec()
	s.ControlPlaneVersions = vs("v1.35.4", "v1.35.4", "v1.36.3-acme.2")
	given := NodeImages{version.MustParse("v1.36.3-acme.2"): "acme/node:v1.36.3-acme.2"}
	dir := t.TempDir()
	cfg, err := Prepare(s, Host{}, dir, given)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Nodes[0].Image != "skewer.local/node:v1.35.4" || cfg.Nodes[2].Image != "acme/node:v1.36.3-acme.2" || cfg.Nodes[3].Image != "skewer.local/node:v1.35.4" {
		t.Errorf("node images %s, %s, %s", cfg.Nodes[0].Image, cfg.Nodes[2].Image, cfg.Nodes[3].Image)
	}
	back, err := loadNodeImages(layout{dir})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, images: back}
	if got := c.NodeImage(version.MustParse("v1.36.3-acme.2")); got != "acme/node:v1.36.3-acme.2" {
		t.Errorf("read back: %s", got)
	}
	if err := c.UseNodeImage(version.MustParse("v1.37.2"), "acme/node:v1.37.2"); err != nil {
		t.Fatal(err)
	}
	again, _ := loadNodeImages(layout{dir})
	if len(again) != 2 || again.For(version.MustParse("v1.37.2")) != "acme/node:v1.37.2" || again.For(version.MustParse("v1.36.3")) != "skewer.local/node:v1.36.3" {
		t.Errorf("after UseNodeImage: %v", again)
	}
	os.WriteFile(filepath.Join(dir, "node-images.json"), []byte("{"), 0o644)
	if _, err := loadNodeImages(layout{dir}); err == nil || !strings.Contains(err.Error(), "node-images.json") {
		t.Errorf("a broken record: %v", err)
	}
}

// A kept apiserver log line is its CRI line behind the file it came from.
func TestParseKeptLine(t *testing.T) {
	l, ok := parseKeptLine("/var/log/pods/kube-system_kube-apiserver-cp_1/kube-apiserver/0.log 2026-12-03T16:09:08.648342Z stderr F I1203 16:09:08.648342 1 server.go:150] Version: v1.35.4")
	if !ok || l.Source != "/var/log/pods/kube-system_kube-apiserver-cp_1/kube-apiserver/0.log" || l.Text != "I1203 16:09:08.648342 1 server.go:150] Version: v1.35.4" ||
		!l.Time.Equal(time.Date(2026, 12, 3, 16, 9, 8, 648342000, time.UTC)) {
		t.Errorf("parseKeptLine = %+v, %v", l, ok)
	}
	if _, ok := parseKeptLine("tail: cannot open"); ok {
		t.Error("a line that is not a kept CRI line was read")
	}
}
