package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/skewer-k8s/skewer/harness/version"
)

// Paths inside control-plane nodes.
const (
	auditPolicyDir = "/etc/kubernetes/audit"
	auditLogDir    = "/var/log/kubernetes/audit"
	// AuditLogFile is where every apiserver writes its audit log.
	AuditLogFile = auditLogDir + "/audit.log"
	patchesDir   = "/etc/skewer/patches"
	// registryHostsDir is containerd's registry configuration in every
	// node (config_path): one _default/hosts.toml that sends every pull
	// to a closed loopback port (noPullHosts).
	registryHostsDir = "/etc/containerd/certs.d"
	// APIServerPort is the port every apiserver listens on in its node.
	APIServerPort = 6443
)

// Host is what the cluster must adapt to on this machine, found by probing.
type Host struct {
	// CgroupV1 means kubelet 1.35+ must be told not to fail on cgroup v1.
	CgroupV1 bool
	// RestrictOOMScoreAdj means runc in a node cannot lower oom_score_adj.
	RestrictOOMScoreAdj bool
}

// layout says where a cluster's host-side files live.
type layout struct {
	dir string
}

func (l layout) auditPolicy() string         { return filepath.Join(l.dir, "audit-policy.yaml") }
func (l layout) auditDir(node string) string { return filepath.Join(l.dir, "audit", node) }
func (l layout) patches(node string) string  { return filepath.Join(l.dir, "patches", node) }
func (l layout) kubeconfig() string          { return filepath.Join(l.dir, "kubeconfig") }
func (l layout) spec() string                { return filepath.Join(l.dir, "spec.yaml") }
func (l layout) registryHosts() string       { return filepath.Join(l.dir, "registry-hosts") }

// makeAuditDir makes the folder node's apiserver writes its audit log
// into, and the log itself, empty, readable by all and owned by whoever
// runs skewer. The apiserver (root in the node) opens an existing log as
// it is (k8s.io/apiserver's ensureLogFile: O_CREATE|O_APPEND, 0600 only
// for a new file) and its rotation (lumberjack) gives the next file the
// old one's mode and owner; without this the log is root's, 0600, and a
// user who runs skewer without root (a hosted CI runner's, in the docker
// group) could not read the audit it judges.
func (l layout) makeAuditDir(node string) error {
	dir := l.auditDir(node)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	log := filepath.Join(dir, filepath.Base(AuditLogFile))
	f, err := os.OpenFile(log, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(log, 0o644) // past the umask
}

// noPullHosts is every node's containerd registry configuration: nodes
// never pull - every image they run is built here and given from the
// host - and this machine has no egress, so a pull the kubelet starts
// before an image is given (a surge joiner's kube-proxy of the other
// version) waited ~50 s on a DNS lookup that times out before it failed.
// Sent to a closed loopback port it fails at once, connection refused,
// and the Pod starts as soon as its image is there.
const noPullHosts = `# skewer: nodes never pull; every image is given from the host.
server = "http://127.0.0.1:1"
`

// registryHostsPatch points containerd's CRI at registryHostsDir.
const registryHostsPatch = "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"" + registryHostsDir + "\"\n"

// On a cgroup v1 host the nodes' runtime and kubelet use the cgroupfs
// driver, not kind's systemd. runc's systemd driver on cgroup v1 freezes a
// container's cgroup while systemd applies its settings
// (opencontainers/cgroups systemd/v1.go: LegacyManager.Set, freezeBeforeSet),
// and on this loaded host that freeze sometimes fails: the container's
// start fails ("error setting cgroup config for procHooks process: unable
// to freeze") and the kubelet starts it again - a restart no step meant,
// the environment's and not the cluster's under test. The cgroupfs driver
// sets a cgroup by writing its files, with no freeze. kind's entrypoint
// makes both cgroup roots (/kubelet and /kubelet.slice); kind itself used
// cgroupfs before Kubernetes 1.24. The kubelet asks containerd which
// driver it uses (KubeletCgroupDriverFromCRI) and is told cgroupDriver too.
// A node the harness adds (a surge's joiner, a new worker) gets the
// runtime's setting with the rest of containerd's configuration, copied
// from a member before its kubelet starts (rollout's join).
const cgroupfsPatch = `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.test-handler.options]
  SystemdCgroup = false
`

// nodeMounts are the host paths every node mounts.
func (l layout) nodeMounts() []v1alpha4.Mount {
	return []v1alpha4.Mount{{HostPath: l.registryHosts(), ContainerPath: registryHostsDir, Readonly: true}}
}

// kindNodeName is the name kind gives the i-th node of a role.
func kindNodeName(cluster string, role v1alpha4.NodeRole, i int) string {
	base := fmt.Sprintf("%s-%s", cluster, role)
	if i == 0 {
		return base
	}
	return fmt.Sprintf("%s%d", base, i+1)
}

// ProxyGate is the Mixed Version Proxy's feature gate, and PeerCAFile the
// CA its peers' serving certificates are verified with (kubeadm's cluster
// CA): the proxy is built only when --peer-ca-file names one.
const (
	ProxyGate  = "UnknownVersionInteroperabilityProxy"
	PeerCAFile = "/etc/kubernetes/pki/ca.crt"
)

// kindConfig turns a Spec into kind's configuration, with every host-side
// path under l.
func kindConfig(s *Spec, h Host, l layout, images NodeImages) (*v1alpha4.Cluster, error) {
	cfg := &v1alpha4.Cluster{
		TypeMeta:      v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:          s.Name,
		FeatureGates:  map[string]bool{},
		RuntimeConfig: map[string]string{},
	}
	for k, v := range s.FeatureGates {
		cfg.FeatureGates[k] = v
	}
	for k, v := range s.RuntimeConfig {
		cfg.RuntimeConfig[k] = v
	}

	args := map[string]string{
		"audit-policy-file":   auditPolicyDir + "/policy.yaml",
		"audit-log-path":      AuditLogFile,
		"audit-log-maxsize":   "200",
		"audit-log-maxbackup": "5",
	}
	// A distribution's gates for the version the cluster starts at (kind
	// gives its gates to every component; a rollout sets them for the
	// apiservers of the version it moves to). With the proxy's gate off
	// there is no peer CA: kube-apiserver refuses --peer-ca-file then.
	gates := s.VersionFeatureGates[s.Version.String()]
	for k, v := range gates {
		cfg.FeatureGates[k] = v
	}
	if on, given := gates[ProxyGate]; s.ProxyEnabled() && (on || !given) {
		args["peer-ca-file"] = PeerCAFile
		// The proxy sends the user's UID in X-Remote-Uid; a peer reads it
		// only when this names it (RemoteRequestHeaderUID, on by default
		// since 1.33), and kubeadm leaves it unset: upstream's documented
		// setting, applied rather than waived (proxy.trust.uid).
		args["requestheader-uid-headers"] = "X-Remote-Uid"
		for _, v := range s.Versions() {
			if v.Minor() < 36 {
				// Beta and on by default from 1.36; alpha before.
				cfg.FeatureGates[ProxyGate] = true
			}
		}
	}
	for k, v := range s.APIServerArgs {
		args[k] = v
	}
	cfg.KubeadmConfigPatchesJSON6902 = apiServerPatches(args)
	cfg.ContainerdConfigPatches = append(cfg.ContainerdConfigPatches, registryHostsPatch)
	if h.CgroupV1 {
		cfg.KubeadmConfigPatches = append(cfg.KubeadmConfigPatches,
			"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\ncgroupDriver: cgroupfs\n")
		cfg.ContainerdConfigPatches = append(cfg.ContainerdConfigPatches, cgroupfsPatch)
	}
	if h.RestrictOOMScoreAdj {
		cfg.ContainerdConfigPatches = append(cfg.ContainerdConfigPatches,
			"[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n")
	}
	bootstrap := s.ControlPlaneVersion(0)
	for i := 0; i < s.ControlPlanes; i++ {
		name := kindNodeName(s.Name, v1alpha4.ControlPlaneRole, i)
		v := s.ControlPlaneVersion(i)
		n := v1alpha4.Node{
			Role:  v1alpha4.ControlPlaneRole,
			Image: images.For(v),
			ExtraMounts: append(l.nodeMounts(),
				v1alpha4.Mount{HostPath: l.auditPolicy(), ContainerPath: auditPolicyDir + "/policy.yaml", Readonly: true},
				v1alpha4.Mount{HostPath: l.auditDir(name), ContainerPath: auditLogDir},
			),
		}
		var extra map[string]string
		if i < len(s.ControlPlaneAPIServerArgs) {
			extra = s.ControlPlaneAPIServerArgs[i]
		}
		// A node at a version other than the cluster's is joined by kubeadm
		// with the cluster's component versions; patch its static Pods to its own.
		if len(extra) > 0 || !v.Equal(bootstrap) {
			n.ExtraMounts = append(n.ExtraMounts, v1alpha4.Mount{HostPath: l.patches(name), ContainerPath: patchesDir, Readonly: true})
			n.KubeadmConfigPatches = append(n.KubeadmConfigPatches, patchesDirectoryPatches(v)...)
		}
		cfg.Nodes = append(cfg.Nodes, n)
	}
	for i := 0; i < s.Workers; i++ {
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole, Image: images.For(s.WorkerVersion(i)), ExtraMounts: l.nodeMounts()})
	}
	return cfg, nil
}

// KubeadmAPIVersion is the kubeadm config API kind generates for a node at v.
func KubeadmAPIVersion(v version.Version) string {
	if v.Minor() >= 36 || v.Major() > 1 {
		return "v1beta4"
	}
	return "v1beta3"
}

// apiServerPatches adds flags and the audit volumes to the apiserver in
// ClusterConfiguration, in the shape of each kubeadm API kind may generate:
// a map of flags in v1beta3, a list of name/value pairs in v1beta4.
func apiServerPatches(args map[string]string) []v1alpha4.PatchJSON6902 {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	volumes := []map[string]any{
		{"name": "audit-policy", "hostPath": auditPolicyDir, "mountPath": auditPolicyDir, "readOnly": true, "pathType": "DirectoryOrCreate"},
		{"name": "audit-log", "hostPath": auditLogDir, "mountPath": auditLogDir, "pathType": "DirectoryOrCreate"},
	}
	var v3, v4 []map[string]any
	for _, k := range names {
		v3 = append(v3, map[string]any{"op": "add", "path": "/apiServer/extraArgs/" + escapePointer(k), "value": args[k]})
		v4 = append(v4, map[string]any{"op": "add", "path": "/apiServer/extraArgs/-", "value": map[string]string{"name": k, "value": args[k]}})
	}
	vol := map[string]any{"op": "add", "path": "/apiServer/extraVolumes", "value": volumes}
	v3 = append(v3, vol)
	v4 = append(v4, vol)
	mk := func(version string, ops []map[string]any) v1alpha4.PatchJSON6902 {
		b, _ := json.Marshal(ops)
		return v1alpha4.PatchJSON6902{Group: "kubeadm.k8s.io", Version: version, Kind: "ClusterConfiguration", Patch: string(b)}
	}
	return []v1alpha4.PatchJSON6902{mk("v1beta3", v3), mk("v1beta4", v4)}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// patchesDirectoryPatches point kubeadm init and join at the node's patches.
func patchesDirectoryPatches(v version.Version) []string {
	var out []string
	for _, kind := range []string{"InitConfiguration", "JoinConfiguration"} {
		out = append(out, fmt.Sprintf("apiVersion: kubeadm.k8s.io/%s\nkind: %s\npatches:\n  directory: %s\n",
			KubeadmAPIVersion(v), kind, patchesDir))
	}
	return out
}

// staticPodPatches are kubeadm patch files for a control plane at version v
// with extra apiserver flags: file name -> JSON patch.
func staticPodPatches(v version.Version, extra map[string]string) map[string]string {
	files := map[string]string{}
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		ops := []map[string]any{{"op": "replace", "path": "/spec/containers/0/image", "value": "registry.k8s.io/" + c + ":" + v.String()}}
		if c == "kube-apiserver" {
			keys := make([]string, 0, len(extra))
			for k := range extra {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				ops = append(ops, map[string]any{"op": "add", "path": "/spec/containers/0/command/-", "value": "--" + k + "=" + extra[k]})
			}
		}
		b, _ := json.Marshal(ops)
		files[c+"+json.json"] = string(b)
	}
	return files
}
