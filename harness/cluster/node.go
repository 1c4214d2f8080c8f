package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/skewer-k8s/skewer/harness/wait"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// The roles kind labels its containers with.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
	RoleLoadBalancer = "external-load-balancer"
)

// kind's container labels.
const (
	clusterLabel = "io.x-k8s.kind.cluster"
	roleLabel    = "io.x-k8s.kind.role"
)

// Node is one container of the cluster: a node, or kind's load balancer.
// Every command skewer runs in a container goes through Run or
// RunWithInput, as an argv list.
type Node struct {
	Name string
	Role string
	kind nodes.Node
}

// Run runs argv in the node and returns its trimmed standard output; a
// failure carries the command's output.
func (n Node) Run(ctx context.Context, argv ...string) (string, error) {
	return n.RunWithInput(ctx, nil, argv...)
}

// RunWithInput is Run with stdin.
func (n Node) RunWithInput(ctx context.Context, stdin io.Reader, argv ...string) (string, error) {
	return docker.ExecInput(ctx, n.Name, stdin, argv...)
}

// Start starts argv in the node as user, detached: a server that runs on
// after the call returns, until a later Run stops it.
func (n Node) Start(ctx context.Context, user string, argv ...string) error {
	return docker.ExecDetached(ctx, n.Name, user, argv...)
}

// ReadFile returns the content of a file in the node.
func (n Node) ReadFile(ctx context.Context, file string) ([]byte, error) {
	out, err := docker.ExecOutput(ctx, n.Name, "cat", file)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s in %s: %w", file, n.Name, err)
	}
	return out, nil
}

// WriteFile writes data to file in the node with mode, atomically: it goes
// to a temporary file in the same directory, which is then renamed over
// file, so a reader that follows the file (the kubelet, the load balancer)
// never sees half of it. Missing parent directories are made. One exec
// (writeFileScript, the values as its arguments): each exec into a node
// costs a docker CLI, a runc and a shim, the largest share of what the
// harness itself spends of a loaded machine (session 32's profile).
func (n Node) WriteFile(ctx context.Context, file string, data []byte, mode os.FileMode) error {
	dir, tmp := path.Dir(file), path.Join(path.Dir(file), "."+path.Base(file)+".skewer-tmp")
	mod := strconv.FormatUint(uint64(mode.Perm()), 8)
	if _, err := n.RunWithInput(ctx, bytes.NewReader(data), "sh", "-c", writeFileScript, "sh", dir, tmp, mod, file); err != nil {
		return fmt.Errorf("failed to write %s in %s: %w", file, n.Name, err)
	}
	return nil
}

// writeFileScript writes its stdin to $4 through $2 in $1, with mode $3,
// and leaves no temporary file behind when a step fails.
const writeFileScript = `mkdir -p "$1" && cat >"$2" && chmod "$3" "$2" && mv -f "$2" "$4" && exit 0
rc=$?; rm -f "$2"; exit $rc`

// CopyFiles copies files (absolute paths) from one node into another with
// their modes, in two execs whatever their number: a tar stream out of
// from, into to. Missing parent directories are made.
func CopyFiles(ctx context.Context, from, to Node, files ...string) error {
	rel := make([]string, len(files))
	for i, f := range files {
		if !path.IsAbs(f) {
			return fmt.Errorf("copying %s from %s: not an absolute path", f, from.Name)
		}
		rel[i] = strings.TrimPrefix(path.Clean(f), "/")
	}
	archive, err := docker.ExecOutput(ctx, from.Name, append([]string{"tar", "-c", "-f", "-", "-C", "/"}, rel...)...)
	if err != nil {
		return fmt.Errorf("reading %s from %s: %w", strings.Join(files, ", "), from.Name, err)
	}
	if _, err := to.RunWithInput(ctx, bytes.NewReader(archive), "tar", "-x", "-f", "-", "-C", "/"); err != nil {
		return fmt.Errorf("writing %s into %s: %w", strings.Join(files, ", "), to.Name, err)
	}
	return nil
}

// IP is the node's IPv4 address on the kind network.
func (n Node) IP() (string, error) {
	ip, _, err := n.kind.IP()
	if err != nil || ip == "" {
		return "", fmt.Errorf("no IPv4 address for %s: %v", n.Name, err)
	}
	return ip, nil
}

// containers lists every container of the cluster, the load balancer
// included, sorted by name.
func (c *Cluster) containers() ([]Node, error) {
	all, err := c.provider.ListNodes(c.Name)
	if err != nil {
		return nil, fmt.Errorf("failed to list nodes of %q: %w", c.Name, err)
	}
	c.knownMu.Lock()
	defer c.knownMu.Unlock()
	listed := map[string]*container{}
	out := make([]Node, 0, len(all))
	for _, n := range all {
		k := c.known[n.String()]
		if k == nil {
			role, err := n.Role()
			if err != nil {
				return nil, fmt.Errorf("failed to read the role of %s: %w", n, err)
			}
			k = &container{role: role}
		}
		listed[n.String()] = k
		out = append(out, Node{Name: n.String(), Role: k.role, kind: n})
	}
	c.known = listed // a container gone is forgotten: its name may come back
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Nodes lists the cluster's nodes (not its load balancer), sorted by name.
func (c *Cluster) Nodes(ctx context.Context) ([]Node, error) {
	all, err := c.containers()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, n := range all {
		if n.Role != RoleLoadBalancer {
			out = append(out, n)
		}
	}
	return out, nil
}

func (c *Cluster) byRole(role string) ([]Node, error) {
	all, err := c.containers()
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, n := range all {
		if n.Role == role {
			out = append(out, n)
		}
	}
	return out, nil
}

// ControlPlanes lists the control-plane nodes.
func (c *Cluster) ControlPlanes(ctx context.Context) ([]Node, error) {
	return c.byRole(RoleControlPlane)
}

// Workers lists the worker nodes.
func (c *Cluster) Workers(ctx context.Context) ([]Node, error) { return c.byRole(RoleWorker) }

// LoadBalancer is kind's load balancer in front of the control planes.
func (c *Cluster) LoadBalancer(ctx context.Context) (Node, error) {
	lbs, err := c.byRole(RoleLoadBalancer)
	if err != nil {
		return Node{}, err
	}
	if len(lbs) != 1 {
		return Node{}, fmt.Errorf("cluster %q has %d load balancers, want 1", c.Name, len(lbs))
	}
	return lbs[0], nil
}

// Node finds a node of the cluster by name.
func (c *Cluster) Node(ctx context.Context, name string) (Node, error) {
	all, err := c.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	for _, n := range all {
		if n.Name == name {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("no node %s in cluster %s", name, c.Name)
}

// BootstrapControlPlane is the node kubeadm init ran on.
func (c *Cluster) BootstrapControlPlane(ctx context.Context) (Node, error) {
	all, err := c.provider.ListNodes(c.Name)
	if err != nil {
		return Node{}, fmt.Errorf("failed to list nodes of %q: %w", c.Name, err)
	}
	n, err := nodeutils.BootstrapControlPlaneNode(all)
	if err != nil {
		return Node{}, err
	}
	return Node{Name: n.String(), Role: RoleControlPlane, kind: n}, nil
}

// SecondaryControlPlanes are the control planes other than the bootstrap one.
func (c *Cluster) SecondaryControlPlanes(ctx context.Context) ([]Node, error) {
	boot, err := c.BootstrapControlPlane(ctx)
	if err != nil {
		return nil, err
	}
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, n := range cps {
		if n.Name != boot.Name {
			out = append(out, n)
		}
	}
	return out, nil
}

// nextNodeName is a kind-style name for a new node of role after every
// one used so far, so a new node never inherits a removed node's name
// (nor its audit log).
func nextNodeName(cluster, role string, used []string) string {
	index := regexp.MustCompile(`-` + regexp.QuoteMeta(role) + `(\d*)$`)
	highest := 0
	for _, n := range used {
		if m := index.FindStringSubmatch(n); m != nil {
			i := 1
			if m[1] != "" {
				i, _ = strconv.Atoi(m[1])
			}
			highest = max(highest, i)
		}
	}
	return kindNodeName(cluster, v1alpha4.NodeRole(role), highest)
}

// AddControlPlaneContainer starts a new control-plane node container from
// image the way kind starts one (labels, network, privileges, the audit
// mounts, the apiserver published on loopback) and waits for its systemd.
// It does not make it a member of anything: joining it is a rollout's job.
func (c *Cluster) AddControlPlaneContainer(ctx context.Context, image string) (Node, error) {
	return c.addNodeContainer(ctx, image, RoleControlPlane)
}

// AddWorkerContainer starts a new worker node container from image the
// way kind starts one, and waits for its systemd; joining it is a
// rollout's job.
func (c *Cluster) AddWorkerContainer(ctx context.Context, image string) (Node, error) {
	return c.addNodeContainer(ctx, image, RoleWorker)
}

func (c *Cluster) addNodeContainer(ctx context.Context, image, role string) (Node, error) {
	if !docker.ImageExists(ctx, image) {
		return Node{}, fmt.Errorf("no node image %s here (build it: skewer images build)", image)
	}
	all, err := c.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	l := layout{c.Dir}
	names, _ := filepath.Glob(l.auditDir("*")) // removed nodes too
	for _, n := range all {
		names = append(names, n.Name)
	}
	name := nextNodeName(c.Name, role, names)
	args := []string{"docker", "run", "--name", name, "--hostname", name,
		"--detach", "--tty", "--net", "kind", "--restart=on-failure:1", "--init=false", "--cgroupns=private",
		"--label", clusterLabel + "=" + c.Name, "--label", roleLabel + "=" + role,
		"--privileged", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var", "--volume", "/lib/modules:/lib/modules:ro",
		"-e", "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER"}
	for _, m := range l.nodeMounts() {
		volume := m.HostPath + ":" + m.ContainerPath
		if m.Readonly {
			volume += ":ro"
		}
		args = append(args, "--volume", volume)
	}
	if role == RoleControlPlane {
		if err := l.makeAuditDir(name); err != nil {
			return Node{}, err
		}
		args = append(args, "-e", "KUBECONFIG=/etc/kubernetes/admin.conf",
			"--volume", l.auditPolicy()+":"+auditPolicyDir+"/policy.yaml:ro",
			"--volume", l.auditDir(name)+":"+auditLogDir,
			"--publish", fmt.Sprintf("127.0.0.1::%d/tcp", APIServerPort))
	}
	if err := run.Command(append(args, image)...).Run(ctx); err != nil {
		return Node{}, fmt.Errorf("failed to start node %s: %w", name, err)
	}
	select {
	case c.grown() <- struct{}{}:
	default: // a signal is pending already
	}
	n, err := c.Node(ctx, name)
	if err != nil {
		return Node{}, fmt.Errorf("node %s started but kind does not list it: %w", name, err)
	}
	return n, waitSystemd(ctx, n)
}

// waitSystemd waits for the boot of n's systemd to finish, in one exec
// (systemdBootScript) where polling from here took twenty in a node's
// first ten seconds: each exec costs a docker CLI, a runc and a shim on a
// loaded machine (session 32).
func waitSystemd(ctx context.Context, n Node) error {
	return wait.For(ctx, "cluster/node-systemd", "systemd running in "+n.Name, func(ctx context.Context) (bool, string, error) {
		out, _ := n.Run(ctx, "sh", "-c", systemdBootScript)
		state := strings.TrimSpace(out)
		return state == "running" || state == "degraded", "systemctl is-system-running: " + state, nil
	})
}

// systemdBootScript prints systemd's state once its boot is over. Until
// kind's entrypoint has made systemd PID 1, systemctl says "offline" or
// cannot reach the bus (nothing on stdout): it asks again every 0.2 s, for
// two minutes at most. Then --wait blocks until the boot has finished.
const systemdBootScript = `i=0
while :; do
  s=$(systemctl is-system-running --wait 2>/dev/null)
  case "$s" in offline|"") ;; *) echo "$s"; exit 0 ;; esac
  i=$((i+1)); [ $i -lt 600 ] || exit 1
  sleep 0.2
done`

// LoadImages copies images from the host's Docker into every node, as
// kind's load docker-image does: what a Pod runs is never pulled.
func (c *Cluster) LoadImages(ctx context.Context, refs ...string) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	return LoadImagesOn(ctx, nodes, refs...)
}

// LoadImagesOn is LoadImages into the given nodes only: a node that
// joined later.
func LoadImagesOn(ctx context.Context, nodes []Node, refs ...string) error {
	dir, err := os.MkdirTemp("", "skewer-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var tars []string
	for i, ref := range refs {
		tar := filepath.Join(dir, fmt.Sprintf("%d.tar", i))
		if err := docker.Save(ctx, ref, tar); err != nil {
			return fmt.Errorf("failed to save %s: %w", ref, err)
		}
		tars = append(tars, tar)
	}
	return loadImageTars(ctx, nodes, tars...)
}
