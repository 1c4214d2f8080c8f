package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/wait"
)

const (
	manifest     = "/etc/kubernetes/manifests/kube-apiserver.yaml"
	stoppedPlace = "/etc/kubernetes/kube-apiserver.yaml.stopped"
)

// StopAPIServer stops Node's apiserver the way an operator stops a static
// Pod - its manifest leaves the kubelet's manifest directory - and waits
// until its container is gone. Revert puts the manifest back and waits for
// the apiserver's /readyz. The stop is graceful: the kubelet sends
// SIGTERM, and the apiserver's shutdown deletes its identity Lease, so its
// peers learn at once that it is gone (KillAPIServer leaves the Lease).
type StopAPIServer struct {
	Node    cluster.Node
	stopped bool
}

func (s *StopAPIServer) Name() string { return "stop the apiserver of " + s.Node.Name }

func (s *StopAPIServer) Inject(ctx context.Context, c *cluster.Cluster) error {
	pids, _ := cluster.APIServerPIDs(ctx, s.Node) // the one the kubelet stops
	if _, err := s.Node.Run(ctx, "mv", manifest, stoppedPlace); err != nil {
		return fmt.Errorf("%s: %w", s.Name(), err)
	}
	s.stopped = true
	if err := endGracefulStop(ctx, c, s.Node, pids); err != nil {
		return err
	}
	return containerGone(ctx, s.Node)
}

// endGracefulStop kills pids, the apiserver the kubelet is stopping
// gracefully, once it has begun to stop (cluster.KillOnceStopping) rather
// than after the 30 s it would hold its watches; nothing when none ran.
func endGracefulStop(ctx context.Context, c *cluster.Cluster, node cluster.Node, pids []string) error {
	if len(pids) == 0 {
		return nil
	}
	return c.KillOnceStopping(ctx, node, pids)
}

func (s *StopAPIServer) Revert(ctx context.Context, c *cluster.Cluster) error {
	if !s.stopped {
		return nil
	}
	if _, err := s.Node.Run(ctx, "mv", stoppedPlace, manifest); err != nil {
		return fmt.Errorf("revert %s: %w", s.Name(), err)
	}
	s.stopped = false
	return waitReady(ctx, c, s.Node)
}

// APIServerFlags restarts Node's apiserver with flags changed: Set adds or
// replaces `--name=value` flags, Items sets one key=value item in a flag
// that is a comma-separated list of them (--feature-gates,
// --runtime-config), keeping the list's other items, and Remove drops
// `--name` flags. Revert restores the manifest as it was and waits for the
// restart.
type APIServerFlags struct {
	Node   cluster.Node
	Set    map[string]string
	Items  map[string]string // flag -> "key=value"
	Remove []string
	// Live makes Inject wait for /livez, not /readyz: for flags under which
	// the apiserver serves but may never be ready (a built-in API its own
	// admission reads turned off, and no proxy to reach it at a peer).
	Live     bool
	original string
}

func (f *APIServerFlags) Name() string {
	var parts []string
	for k, v := range f.Set {
		parts = append(parts, fmt.Sprintf("--%s=%s", k, v))
	}
	for k, item := range f.Items {
		parts = append(parts, fmt.Sprintf("%s in --%s", item, k))
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
	changed, err := editFlags(raw, f.Set, f.Items, f.Remove)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	// Kept before the restart: a restart that fails is reverted too.
	f.original = raw
	if err := restartWith(ctx, c, f.Node, changed, f.Live); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

func (f *APIServerFlags) Revert(ctx context.Context, c *cluster.Cluster) error {
	if f.original == "" {
		return nil
	}
	if err := restartWith(ctx, c, f.Node, f.original, false); err != nil {
		return fmt.Errorf("revert %s: %w", f.Name(), err)
	}
	f.original = ""
	return nil
}

// editFlags changes the kube-apiserver command of a static Pod manifest:
// set and remove as APIServerFlags' Set and Remove, items as its Items.
func editFlags(manifestYAML string, set, items map[string]string, remove []string) (string, error) {
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
	set = maps.Clone(set)
	for flag, item := range items {
		if _, ok := set[flag]; ok {
			return "", fmt.Errorf("--%s is both set and given an item", flag)
		}
		if set == nil {
			set = map[string]string{}
		}
		set[flag] = withListItem(ctr.Command, flag, item)
	}
	pending := maps.Clone(set)
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

// withListItem is the value of flag (a comma-separated key=value list)
// in command with item's key set to item's value, every other item kept.
func withListItem(command []string, flag, item string) string {
	key, _, _ := strings.Cut(item, "=")
	var items []string
	for _, arg := range command {
		if v, ok := strings.CutPrefix(arg, "--"+flag+"="); ok {
			for _, it := range strings.Split(v, ",") {
				if k, _, _ := strings.Cut(it, "="); it != "" && k != key {
					items = append(items, it)
				}
			}
		}
	}
	return strings.Join(append(items, item), ",")
}

// restartWith replaces node's apiserver manifest with content and waits
// until a new apiserver container runs and answers /readyz.
func restartWith(ctx context.Context, c *cluster.Cluster, node cluster.Node, content string, live bool) error {
	if err := replaceManifest(ctx, c, node, content, true); err != nil {
		return err
	}
	if live {
		return waitHealthy(ctx, c, node, "/livez", cluster.Livez)
	}
	return waitReady(ctx, c, node)
}

// replaceManifest replaces node's apiserver manifest with content and
// waits until a new apiserver container runs, the old one killed once it
// has begun to stop (endGracefulStop). When the new one will serve the
// node's kubelet (servesKubelet), the kubelet is then restarted to start
// it without its back-off (cluster.RestartKubeletOnceExited). Not
// otherwise: a restarted kubelet stops no removed Pod until its own
// apiserver has served it the Node (pkg/kubelet deletePod: "skipping
// delete because sources aren't ready yet"), and one whose apiserver
// serves a certificate its CA did not sign kept that apiserver running
// for minutes after its manifest was reverted (session 33).
func replaceManifest(ctx context.Context, c *cluster.Cluster, node cluster.Node, content string, servesKubelet bool) error {
	// Containers created from now on are the restart's: an older one may
	// be the newest listed (a static Pod whose manifest changes back gets
	// its old sandbox, and its old exited container, again).
	since := time.Now().UnixNano()
	pids, _ := cluster.APIServerPIDs(ctx, node) // the one the kubelet stops
	// Written atomically: the kubelet never reads half a manifest.
	if err := node.WriteFile(ctx, manifest, []byte(content), 0o600); err != nil {
		return err
	}
	if err := endGracefulStop(ctx, c, node, pids); err != nil {
		return err
	}
	if len(pids) > 0 && servesKubelet {
		if err := cluster.RestartKubeletOnceExited(ctx, node, pids); err != nil {
			return err
		}
	}
	return wait.For(ctx, "faults/apiserver-restart", node.Name+"'s apiserver restarted", restarted(node, since))
}

// restarted is done once a kube-apiserver container created after since
// runs on node; one that exited at start ends the wait with its last logs,
// since the kubelet would only restart it into the same failure.
func restarted(node cluster.Node, since int64) wait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		id, state, err := latestAPIServer(ctx, node, since)
		switch {
		case err != nil:
			return false, "", err
		case id == "":
			return false, "no kube-apiserver container created since the manifest changed", nil
		case state == "CONTAINER_EXITED":
			logs, _ := node.Run(ctx, "crictl", "logs", "--tail", "3", id)
			return false, "", fmt.Errorf("the apiserver of %s exited at start: %s", node.Name, strings.TrimSpace(logs))
		}
		return state == "CONTAINER_RUNNING", "container " + id + " " + state, nil
	}
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

// waitReady waits until node's own apiserver answers /readyz with ok.
func waitReady(ctx context.Context, c *cluster.Cluster, node cluster.Node) error {
	return waitHealthy(ctx, c, node, "/readyz", cluster.Readyz)
}

// waitHealthy waits until node's own apiserver answers path with ok.
func waitHealthy(ctx context.Context, c *cluster.Cluster, node cluster.Node, path string, check func(context.Context, kubernetes.Interface) error) error {
	cs, err := c.APIServerClient(ctx, node)
	if err != nil {
		return err
	}
	return cluster.WaitHealthy(ctx, "faults/apiserver-restart", node.Name+"'s apiserver "+path, cs, check)
}

// containerGone waits until no kube-apiserver container runs on node.
func containerGone(ctx context.Context, node cluster.Node) error {
	return wait.For(ctx, "faults/apiserver-restart", node.Name+"'s apiserver container gone", func(ctx context.Context) (bool, string, error) {
		id, err := apiserverContainer(ctx, node)
		if err != nil {
			return false, "", err
		}
		return id == "", "container " + id + " still running", nil
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

// KillAPIServer kills Node's apiserver with SIGKILL and keeps it dead:
// the kubelet is stopped first, so nothing restarts it, and nothing of a
// graceful shutdown runs - its identity Lease and its address record in
// etcd stay behind, as after a crash or a lost node. Everything else on
// the node (etcd, the controller manager, the scheduler) keeps running.
// Revert starts the kubelet, which starts the apiserver again, and waits
// for its /readyz.
type KillAPIServer struct {
	Node   cluster.Node
	killed int64 // when, in nanoseconds since the epoch; 0 while not injected
}

func (k *KillAPIServer) Name() string {
	return "kill the apiserver of " + k.Node.Name + " (SIGKILL, kubelet stopped)"
}

func (k *KillAPIServer) Inject(ctx context.Context, c *cluster.Cluster) error {
	if _, err := k.Node.Run(ctx, "systemctl", "stop", "kubelet"); err != nil {
		return fmt.Errorf("%s: %w", k.Name(), err)
	}
	k.killed = time.Now().UnixNano()
	if _, err := k.Node.Run(ctx, "pkill", "--signal", "KILL", "--exact", "kube-apiserver"); err != nil {
		return fmt.Errorf("%s: %w", k.Name(), err)
	}
	return containerGone(ctx, k.Node)
}

func (k *KillAPIServer) Revert(ctx context.Context, c *cluster.Cluster) error {
	if k.killed == 0 {
		return nil
	}
	if _, err := k.Node.Run(ctx, "systemctl", "start", "kubelet"); err != nil {
		return fmt.Errorf("revert %s: %w", k.Name(), err)
	}
	if err := wait.For(ctx, "faults/apiserver-restart", k.Node.Name+"'s apiserver started again", restarted(k.Node, k.killed)); err != nil {
		return err
	}
	k.killed = 0
	return waitReady(ctx, c, k.Node)
}
