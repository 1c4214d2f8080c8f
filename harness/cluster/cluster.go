package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kind "sigs.k8s.io/kind/pkg/cluster"

	"github.com/skewer-k8s/skewer/harness/wait"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// Cluster is a handle on a kind cluster made (or adopted) by skewer.
type Cluster struct {
	Name string
	// Dir holds the cluster's kubeconfig, audit policy and audit logs.
	Dir string
	// Spec is what the cluster was created from; nil for a cluster skewer
	// did not create.
	Spec     *Spec
	images   NodeImages
	provider *kind.Provider
	log      *progress
	// known is what was read once of each container, by name: its kind
	// role and the host port its apiserver is published on never change
	// while it lives, and reading them is a docker command each time -
	// a few a second while a rollout waits. A container no longer listed
	// is forgotten (containers): its name may come back.
	knownMu sync.Mutex
	known   map[string]*container
	// grew says a node container was added (addNodeContainer): what
	// KeepAPIServerLogs waits for, rather than listing the containers.
	grewOnce sync.Once
	grew     chan struct{}
}

// grown is the channel a node's addition is signalled on (one pending
// signal at most: a listing after it sees every node added before).
func (c *Cluster) grown() chan struct{} {
	c.grewOnce.Do(func() { c.grew = make(chan struct{}, 1) })
	return c.grew
}

// container is what Cluster keeps of one of its containers.
type container struct{ role, apiserverPort string }

// Options tune Create and Open.
type Options struct {
	// StateDir is where each cluster's files live (default: StateDir()).
	StateDir string
	// Out receives progress lines (default: os.Stderr).
	Out io.Writer
	// Retain keeps the node containers of a failed create for debugging.
	Retain bool
	// WaitForReady bounds the wait for every node to be Ready.
	WaitForReady time.Duration
	// Verbosity is kind's log level: 0 prints its status lines, higher
	// levels its debug output too (kind's own -v).
	Verbosity int
}

// StateDir is $SKEWER_STATE, else the user cache directory's skewer/clusters.
func StateDir() string {
	if d := os.Getenv("SKEWER_STATE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "skewer", "clusters")
}

func (o *Options) defaults() {
	if o.StateDir == "" {
		o.StateDir = StateDir()
	}
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.WaitForReady == 0 {
		o.WaitForReady = 4 * time.Minute
	}
}

func newProvider(p *progress) *kind.Provider {
	return kind.NewProvider(kind.ProviderWithDocker(), kind.ProviderWithLogger(p))
}

// Open adopts an existing cluster by name.
func Open(ctx context.Context, name string, o Options) (*Cluster, error) {
	o.defaults()
	p := newProgress(o.Out, o.Verbosity)
	c := &Cluster{Name: name, Dir: filepath.Join(o.StateDir, name), provider: newProvider(p), log: p}
	names, err := c.provider.List()
	if err != nil {
		return nil, fmt.Errorf("failed to list kind clusters: %w", err)
	}
	for _, n := range names {
		if n == name {
			if spec, err := LoadProfile(layout{c.Dir}.spec()); err == nil {
				c.Spec = spec
			}
			if c.images, err = loadNodeImages(layout{c.Dir}); err != nil {
				return nil, err
			}
			if _, err := os.Stat(c.Kubeconfig()); err != nil {
				if err := c.provider.ExportKubeConfig(name, c.Kubeconfig(), false); err != nil {
					return nil, fmt.Errorf("failed to write kubeconfig of cluster %q: %w", name, err)
				}
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w named %q", ErrNoCluster, name)
}

// ErrNoCluster is Open's error when no kind cluster has the name.
var ErrNoCluster = errors.New("no kind cluster")

// VersionFeatureGates are the apiserver feature gates of each version
// the cluster's Spec names (Spec.VersionFeatureGates); none for a
// cluster whose Spec is not known.
func (c *Cluster) VersionFeatureGates() map[string]map[string]bool {
	if c.Spec == nil {
		return nil
	}
	return c.Spec.VersionFeatureGates
}

// Kubeconfig is the path of the cluster's own kubeconfig; the user's
// ~/.kube/config is never touched.
func (c *Cluster) Kubeconfig() string { return layout{c.Dir}.kubeconfig() }

// AuditLog is where the host keeps the audit log of node's apiserver.
func (c *Cluster) AuditLog(node string) string {
	return filepath.Join(layout{c.Dir}.auditDir(node), filepath.Base(AuditLogFile))
}

// AuditLogs are the audit logs of every apiserver the cluster has had,
// those of control planes since removed too.
func (c *Cluster) AuditLogs() ([]string, error) {
	return filepath.Glob(c.AuditLog("*"))
}

// RESTConfig is the config for the load-balanced endpoint.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %s: %w", c.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	return cfg, nil
}

// clientQPS and clientBurst limit a client of the harness: kubectl's
// limits for its discovery client (k8s.io/kubectl pkg/cmd/cmd.go), not
// client-go's default of 5 a second. One client serves every waiter of
// the sidecar checks (ChecksAtOnce of them on each kubelet, each asking
// about once a second, some twice): at 5 a second their requests queued
// in the client - a certify run (2026-12-08) logged requests held 1.17 s,
// which delays what the checks time (a Pod leaving endpoints, recovering,
// Ready) by the client's queue, not the cluster's. The limit stays, to
// bound a loop gone wrong.
const (
	clientQPS   = 50
	clientBurst = 300
)

// Client is a clientset for the load-balanced endpoint.
func (c *Cluster) Client() (*kubernetes.Clientset, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// APIServerConfig is a config that reaches node's own apiserver directly,
// past the load balancer, through the port kind publishes for every control
// plane on the host's loopback (so it works where container IPs are not routable).
func (c *Cluster) APIServerConfig(ctx context.Context, node Node) (*rest.Config, error) {
	hostPort, err := c.apiserverPort(ctx, node)
	if err != nil {
		return nil, err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://" + hostPort
	return cfg, nil
}

// apiserverPort is the loopback address node's apiserver is published on,
// read once while the container lives.
func (c *Cluster) apiserverPort(ctx context.Context, node Node) (string, error) {
	c.knownMu.Lock()
	if k := c.known[node.Name]; k != nil && k.apiserverPort != "" {
		c.knownMu.Unlock()
		return k.apiserverPort, nil
	}
	c.knownMu.Unlock()
	out, err := run.Command("docker", "port", node.Name, fmt.Sprintf("%d/tcp", APIServerPort)).String(ctx)
	if err != nil {
		return "", fmt.Errorf("node %s publishes no apiserver port: %w", node.Name, err)
	}
	var hostPort string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "127.0.0.1:") {
			hostPort = strings.TrimSpace(line)
		}
	}
	if hostPort == "" {
		return "", fmt.Errorf("node %s publishes its apiserver port on no loopback address (%q)", node.Name, out)
	}
	c.knownMu.Lock()
	if k := c.known[node.Name]; k != nil {
		k.apiserverPort = hostPort
	}
	c.knownMu.Unlock()
	return hostPort, nil
}

// Readyz says why the apiserver cs talks to is not ready, or nil when it
// answers /readyz with ok. An apiserver serves before it is ready - until
// its authorizer has synced it answers 403 to everyone - so waits on an
// apiserver go by this, not by an answer alone.
func Readyz(ctx context.Context, cs kubernetes.Interface) error { return health(ctx, cs, "/readyz") }

// Livez is Readyz for /livez: the apiserver runs and serves, ready or not.
func Livez(ctx context.Context, cs kubernetes.Interface) error { return health(ctx, cs, "/livez") }

// WaitHealthy waits, by the wait budget named budget, until check (Readyz,
// Livez) passes on the apiserver cs talks to; what names it in the wait.
func WaitHealthy(ctx context.Context, budget, what string, cs kubernetes.Interface, check func(context.Context, kubernetes.Interface) error) error {
	return wait.For(ctx, budget, what, func(ctx context.Context) (bool, string, error) {
		if err := check(ctx, cs); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

func health(ctx context.Context, cs kubernetes.Interface, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// No retry: callers poll, and client-go would otherwise retry a
	// connection reset (a stopped apiserver behind Docker's port proxy)
	// until the deadline, hiding what it met.
	raw, err := cs.Discovery().RESTClient().Get().AbsPath(path).MaxRetries(0).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if string(raw) != "ok" {
		return fmt.Errorf("%s: %q", path, raw)
	}
	return nil
}

// APIServerClient is a clientset for node's own apiserver.
func (c *Cluster) APIServerClient(ctx context.Context, node Node) (*kubernetes.Clientset, error) {
	cfg, err := c.APIServerConfig(ctx, node)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// ExportLogs writes node logs (kind's export, and the journals kept of the
// nodes removed: KeepNodeLogs), the load balancer's (each
// connection's backend: kind's export leaves it out), every apiserver's
// log kept since the run began (KeepAPIServerLogs: those of apiservers
// since replaced too) and every apiserver's audit log under dir.
func (c *Cluster) ExportLogs(ctx context.Context, dir string) error {
	var errs []error
	if err := c.provider.CollectLogs(c.Name, filepath.Join(dir, "logs")); err != nil {
		errs = append(errs, fmt.Errorf("failed to export node logs: %w", err))
	}
	if err := exportRemovedNodeLogs((layout{c.Dir}).removedNodeLogs(), filepath.Join(dir, "logs")); err != nil {
		errs = append(errs, fmt.Errorf("failed to export the logs kept of the nodes removed: %w", err))
	}
	if err := scrubCredentials(filepath.Join(dir, "logs")); err != nil {
		errs = append(errs, fmt.Errorf("failed to scrub credentials from the node descriptions: %w", err))
	}
	if lb, err := c.LoadBalancer(ctx); err == nil {
		if err := writeLogs(ctx, lb.Name, filepath.Join(dir, "logs", lb.Name+".log")); err != nil {
			errs = append(errs, fmt.Errorf("failed to export the load balancer's log: %w", err))
		}
	}
	if kept := (layout{c.Dir}).apiserverLogs(); dirExists(kept) {
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
			errs = append(errs, err)
		} else if err := run.Command("cp", "-r", kept, filepath.Join(dir, "logs", "apiservers")).Run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("failed to export the kept apiserver logs: %w", err))
		}
	}
	auditSrc := filepath.Join(c.Dir, "audit")
	if _, err := os.Stat(auditSrc); err == nil {
		if err := run.Command("cp", "-r", auditSrc, filepath.Join(dir, "audit")).Run(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeLogs writes container's log to the file at path.
func writeLogs(ctx context.Context, container, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return docker.Logs(ctx, container, f)
}

// Summary is one kind cluster on this machine.
type Summary struct {
	Name  string `json:"name"`
	Nodes int    `json:"nodes"`
	// Skewer says skewer made it: its spec and kubeconfig are in the state
	// directory, the kubeconfig named here.
	Skewer     bool   `json:"skewer"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// List is every kind cluster on this machine, skewer's and others', by
// name.
func List(o Options) ([]Summary, error) {
	o.defaults()
	p := newProvider(newProgress(o.Out, o.Verbosity))
	names, err := p.List()
	if err != nil {
		return nil, fmt.Errorf("failed to list kind clusters: %w", err)
	}
	sort.Strings(names)
	out := make([]Summary, 0, len(names))
	for _, name := range names {
		nodes, err := p.ListNodes(name)
		if err != nil {
			return nil, fmt.Errorf("failed to list the nodes of %s: %w", name, err)
		}
		s := Summary{Name: name, Nodes: len(nodes)}
		l := layout{filepath.Join(o.StateDir, name)}
		if _, err := os.Stat(l.spec()); err == nil {
			s.Skewer, s.Kubeconfig = true, l.kubeconfig()
		}
		out = append(out, s)
	}
	return out, nil
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
