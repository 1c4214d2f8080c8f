// Package faults injects the faults the suites reason about into a real
// cluster and takes them out again: a peer link black-holed, an apiserver
// stopped, an apiserver restarted with other flags. Each Fault is injected
// and reverted by the caller, who defers Revert right after Inject; a
// Revert of a fault never injected does nothing.
//
// This machine's kernel has no netem (../shared/env/README.md), so a link
// is black-holed with iptables in the sender's network namespace, which
// every kind node has (nodes are privileged containers), and slowed by a
// userspace relay (./relay) the sender's connections are redirected to.
package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
	"github.com/skewer-k8s/skewer/internal/source"
)

// Fault is one injectable fault.
type Fault interface {
	// Name says what the fault does, for logs and reports.
	Name() string
	Inject(ctx context.Context, c *cluster.Cluster) error
	Revert(ctx context.Context, c *cluster.Cluster) error
}

// BlackHole drops, in From's network namespace, every TCP packet From
// sends to To's apiserver port: connections from From's apiserver to To's
// hang without an answer, as across a dead link. Nothing else of From's or
// To's traffic is touched.
type BlackHole struct {
	From, To cluster.Node
	rule     []string
}

func (b *BlackHole) Name() string {
	return fmt.Sprintf("black hole %s -> %s:%d", b.From.Name, b.To.Name, cluster.APIServerPort)
}

func (b *BlackHole) Inject(ctx context.Context, _ *cluster.Cluster) error {
	ip, err := NodeIP(ctx, b.To)
	if err != nil {
		return err
	}
	rule := []string{"OUTPUT", "-d", ip, "-p", "tcp", "--dport", fmt.Sprint(cluster.APIServerPort), "-j", "DROP"}
	if _, err := b.From.Run(ctx, append([]string{"iptables", "-I"}, rule...)...); err != nil {
		return fmt.Errorf("%s: %w", b.Name(), err)
	}
	b.rule = rule
	return nil
}

func (b *BlackHole) Revert(ctx context.Context, _ *cluster.Cluster) error {
	if b.rule == nil {
		return nil
	}
	if _, err := b.From.Run(ctx, append([]string{"iptables", "-D"}, b.rule...)...); err != nil {
		return fmt.Errorf("revert %s: %w", b.Name(), err)
	}
	b.rule = nil
	return nil
}

// NodeIP is node's IPv4 address on the kind network.
func NodeIP(ctx context.Context, node cluster.Node) (string, error) {
	ip, _, err := node.IP()
	if err != nil || ip == "" {
		return "", fmt.Errorf("no IPv4 address for %s: %v", node.Name, err)
	}
	return ip, nil
}

const (
	manifest      = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	stoppedPlace  = "/etc/kubernetes/kube-apiserver.yaml.stopped"
	restartBudget = 3 * time.Minute
)

// StopAPIServer stops Node's apiserver the way an operator stops a static
// Pod - its manifest leaves the kubelet's manifest directory - and waits
// until its container is gone. Revert puts the manifest back and waits for
// the apiserver's /readyz. Its identity lease stays until it expires, so
// peers still believe it is there: that is the point of the fault.
type StopAPIServer struct {
	Node    cluster.Node
	stopped bool
}

func (s *StopAPIServer) Name() string { return "stop the apiserver of " + s.Node.Name }

func (s *StopAPIServer) Inject(ctx context.Context, c *cluster.Cluster) error {
	if _, err := s.Node.Run(ctx, "mv", manifest, stoppedPlace); err != nil {
		return fmt.Errorf("%s: %w", s.Name(), err)
	}
	s.stopped = true
	return waitFor(ctx, restartBudget, s.Node.Name+"'s apiserver container gone", func() (bool, error) {
		id, err := apiserverContainer(ctx, s.Node)
		return id == "", err
	})
}

func (s *StopAPIServer) Revert(ctx context.Context, c *cluster.Cluster) error {
	if !s.stopped {
		return nil
	}
	if _, err := s.Node.Run(ctx, "mv", stoppedPlace, manifest); err != nil {
		return fmt.Errorf("revert %s: %w", s.Name(), err)
	}
	s.stopped = false
	return WaitReady(ctx, c, s.Node)
}

// APIServerFlags restarts Node's apiserver with flags changed: Set adds or
// replaces `--name=value` flags, Remove drops `--name` flags. Revert
// restores the manifest as it was and waits for the restart.
type APIServerFlags struct {
	Node     cluster.Node
	Set      map[string]string
	Remove   []string
	original string
}

func (f *APIServerFlags) Name() string {
	var parts []string
	for k, v := range f.Set {
		parts = append(parts, fmt.Sprintf("--%s=%s", k, v))
	}
	for _, k := range f.Remove {
		parts = append(parts, "no --"+k)
	}
	return fmt.Sprintf("restart the apiserver of %s with %s", f.Node.Name, strings.Join(parts, ", "))
}

func (f *APIServerFlags) Inject(ctx context.Context, c *cluster.Cluster) error {
	raw, err := f.Node.Run(ctx, "cat", manifest)
	if err != nil {
		return err
	}
	changed, err := EditFlags(raw, f.Set, f.Remove)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	// Kept before the restart: a restart that fails is reverted too.
	f.original = raw
	if err := restartWith(ctx, c, f.Node, changed); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

func (f *APIServerFlags) Revert(ctx context.Context, c *cluster.Cluster) error {
	if f.original == "" {
		return nil
	}
	if err := restartWith(ctx, c, f.Node, f.original); err != nil {
		return fmt.Errorf("revert %s: %w", f.Name(), err)
	}
	f.original = ""
	return nil
}

// EditFlags changes the kube-apiserver command of a static Pod manifest.
func EditFlags(manifestYAML string, set map[string]string, remove []string) (string, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal([]byte(manifestYAML), &pod); err != nil {
		return "", fmt.Errorf("not a static Pod manifest: %w", err)
	}
	var ctr *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "kube-apiserver" {
			ctr = &pod.Spec.Containers[i]
		}
	}
	if ctr == nil {
		return "", fmt.Errorf("the manifest has no kube-apiserver container")
	}
	for _, k := range remove {
		if _, ok := set[k]; ok {
			return "", fmt.Errorf("--%s is both set and removed", k)
		}
	}
	pending := map[string]string{}
	for k, v := range set {
		pending[k] = v
	}
	var cmd []string
	for _, arg := range ctr.Command {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		switch {
		case !strings.HasPrefix(arg, "--"):
			cmd = append(cmd, arg)
		case slices.Contains(remove, name):
			continue
		default:
			if v, ok := pending[name]; ok {
				arg = "--" + name + "=" + v
				delete(pending, name)
			}
			cmd = append(cmd, arg)
		}
	}
	for k, v := range set {
		if _, ok := pending[k]; ok {
			cmd = append(cmd, "--"+k+"="+v)
		}
	}
	ctr.Command = cmd
	out, err := yaml.Marshal(&pod)
	return string(out), err
}

// restartWith replaces node's apiserver manifest with content and waits
// until a new apiserver container runs and answers /readyz.
func restartWith(ctx context.Context, c *cluster.Cluster, node cluster.Node, content string) error {
	// Containers created from now on are the restart's: an older one may
	// be the newest listed (a static Pod whose manifest changes back gets
	// its old sandbox, and its old exited container, again).
	since := time.Now().UnixNano()
	// Written beside the manifest directory and renamed into it: the
	// kubelet never reads half a file, nor a stray one.
	tmp := "/etc/kubernetes/kube-apiserver.yaml.next"
	if err := docker.ExecInput(ctx, node.Name, strings.NewReader(content), "sh", "-c", "cat > "+tmp+" && mv "+tmp+" "+manifest); err != nil {
		return err
	}
	if err := waitFor(ctx, restartBudget, node.Name+"'s apiserver restarted", func() (bool, error) {
		id, state, err := latestAPIServer(ctx, node, since)
		if err != nil || id == "" {
			return false, err
		}
		if state == "CONTAINER_EXITED" {
			logs, _ := node.Run(ctx, "crictl", "logs", "--tail", "3", id)
			return false, fmt.Errorf("the apiserver of %s exited at start: %s", node.Name, strings.TrimSpace(logs))
		}
		return state == "CONTAINER_RUNNING", nil
	}); err != nil {
		return err
	}
	return WaitReady(ctx, c, node)
}

// latestAPIServer is the newest kube-apiserver container on node created
// after since (nanoseconds since the epoch), running or not, and its state.
func latestAPIServer(ctx context.Context, node cluster.Node, since int64) (id, state string, err error) {
	out, err := node.Run(ctx, "crictl", "ps", "-a", "-o", "json", "--name", "^kube-apiserver$")
	if err != nil {
		return "", "", fmt.Errorf("crictl on %s: %w", node.Name, err)
	}
	var list struct {
		Containers []struct {
			ID        string `json:"id"`
			State     string `json:"state"`
			CreatedAt string `json:"createdAt"`
		} `json:"containers"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return "", "", fmt.Errorf("crictl ps on %s: %w", node.Name, err)
	}
	var newest int64
	for _, ctr := range list.Containers {
		// createdAt is nanoseconds since the epoch, as a decimal string.
		created, err := strconv.ParseInt(ctr.CreatedAt, 10, 64)
		if err != nil {
			return "", "", fmt.Errorf("crictl ps on %s: createdAt %q: %w", node.Name, ctr.CreatedAt, err)
		}
		if created > since && created > newest {
			newest, id, state = created, ctr.ID, ctr.State
		}
	}
	return id, state, nil
}

// WaitReady waits until node's own apiserver answers /readyz with ok.
func WaitReady(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	cs, err := c.APIServerClient(ctx, node)
	if err != nil {
		return err
	}
	return waitFor(ctx, restartBudget, node.Name+"'s apiserver /readyz", func() (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err == nil && string(raw) == "ok", nil
	})
}

// apiserverContainer is the ID of the running kube-apiserver container on
// node, or "" when there is none.
func apiserverContainer(ctx context.Context, node cluster.Node) (string, error) {
	out, err := node.Run(ctx, "crictl", "ps", "-q", "--state", "running", "--name", "^kube-apiserver$")
	if err != nil {
		return "", fmt.Errorf("crictl on %s: %w", node.Name, err)
	}
	return strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]), nil
}

func waitFor(ctx context.Context, budget time.Duration, what string, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for %s after %s", what, budget)
		case <-time.After(time.Second):
		}
	}
}

// The relay a SlowLink runs in the sender's node, as a user of its own so
// that its own connections to the peer are not sent back to it.
const (
	relayPath = "/usr/local/bin/skewer-relay"
	relayUID  = "4242"
)

// relayPort is the port of the relay toward ip, one per peer so that a
// node can have slow links to several.
func relayPort(ip string) string {
	last := ip[strings.LastIndex(ip, ".")+1:]
	n, _ := strconv.Atoi(last)
	return strconv.Itoa(20000 + n)
}

// SlowLink holds every byte between From and To's apiserver port for
// Delay in each direction: new connections From opens to To:6443 are
// redirected (iptables REDIRECT in From's netns) to a relay that delays
// them (./relay), and the connections already open are cut (ss -K) so the
// next ones take the slow path. Revert removes the rule and stops the
// relay, which cuts the slow connections in turn.
type SlowLink struct {
	From, To cluster.Node
	Delay    time.Duration
	rule     []string
	listen   string
}

func (l *SlowLink) Name() string {
	return fmt.Sprintf("slow link %s -> %s:%d (+%s each way)", l.From.Name, l.To.Name, cluster.APIServerPort, l.Delay)
}

func (l *SlowLink) Inject(ctx context.Context, _ *cluster.Cluster) error {
	ip, err := NodeIP(ctx, l.To)
	if err != nil {
		return err
	}
	bin, err := buildRelay(ctx)
	if err != nil {
		return err
	}
	if err := docker.Copy(ctx, bin, l.From.Name, relayPath); err != nil {
		return err
	}
	target := fmt.Sprintf("%s:%d", ip, cluster.APIServerPort)
	port := relayPort(ip)
	l.listen = "127.0.0.1:" + port
	if err := run.Command("docker", "exec", "-d", "--user", relayUID, l.From.Name,
		relayPath, "-listen", l.listen, "-to", target, "-delay", l.Delay.String()).Run(ctx); err != nil {
		return fmt.Errorf("%s: start the relay: %w", l.Name(), err)
	}
	if err := waitFor(ctx, 30*time.Second, "the relay listening in "+l.From.Name, func() (bool, error) {
		out, _ := l.From.Run(ctx, "ss", "-Hltn", "sport = :"+port)
		return strings.Contains(out, port), nil
	}); err != nil {
		return err
	}
	rule := []string{"OUTPUT", "-d", ip, "-p", "tcp", "--dport", fmt.Sprint(cluster.APIServerPort),
		"-m", "owner", "!", "--uid-owner", relayUID, "-j", "REDIRECT", "--to-ports", port}
	if _, err := l.From.Run(ctx, append([]string{"iptables", "-t", "nat", "-I"}, rule...)...); err != nil {
		l.stopRelay(ctx)
		return fmt.Errorf("%s: %w", l.Name(), err)
	}
	l.rule = rule
	_, err = l.From.Run(ctx, "ss", "-K", "dst", ip, "dport", "=", fmt.Sprint(cluster.APIServerPort))
	return err
}

func (l *SlowLink) Revert(ctx context.Context, _ *cluster.Cluster) error {
	if l.rule == nil {
		return nil
	}
	if _, err := l.From.Run(ctx, append([]string{"iptables", "-t", "nat", "-D"}, l.rule...)...); err != nil {
		return fmt.Errorf("revert %s: %w", l.Name(), err)
	}
	l.rule = nil
	l.stopRelay(ctx)
	return nil
}

// stopRelay stops this link's relay, which cuts the connections through it.
func (l *SlowLink) stopRelay(ctx context.Context) {
	_, _ = l.From.Run(ctx, "pkill", "-f", relayPath+" -listen "+l.listen+" ")
}

// buildRelay builds ./relay as a static binary from the checkout (Go's
// build cache makes it quick after the first time).
func buildRelay(ctx context.Context) (string, error) {
	root, err := source.Root()
	if err != nil {
		return "", err
	}
	out := filepath.Join(os.TempDir(), "skewer-relay")
	cmd := run.Command("go", "build", "-o", out, "./harness/faults/relay")
	cmd.Dir, cmd.Env = root, []string{"CGO_ENABLED=0"}
	if err := cmd.Run(ctx); err != nil {
		return "", fmt.Errorf("failed to build the relay: %w", err)
	}
	return out, nil
}
