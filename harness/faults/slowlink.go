package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/wait"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
	"github.com/skewer-k8s/skewer/internal/source"
)

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
	ip, err := l.To.IP()
	if err != nil {
		return err
	}
	if err := copyRelay(ctx, l.From.Name); err != nil {
		return err
	}
	target := fmt.Sprintf("%s:%d", ip, cluster.APIServerPort)
	port := relayPort(ip)
	l.listen = "127.0.0.1:" + port
	if err := l.From.Start(ctx, relayUID, relayPath, "-listen", l.listen, "-to", target, "-delay", l.Delay.String()); err != nil {
		return fmt.Errorf("%s: start the relay: %w", l.Name(), err)
	}
	if err := wait.For(ctx, "faults/relay-listening", "the relay listening in "+l.From.Name, listening(l.From, port)); err != nil {
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

// listening is done once something listens on port in node. A failing ss
// is only what was seen: the node may be busy, not broken.
func listening(node cluster.Node, port string) wait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		out, err := node.Run(ctx, "ss", "-Hltn", "sport = :"+port)
		switch {
		case strings.Contains(out, port):
			return true, "", nil
		case err != nil:
			return false, "ss: " + err.Error(), nil
		}
		return false, "nothing listening on port " + port, nil
	}
}

// stopRelay stops this link's relay, which cuts the connections through it.
func (l *SlowLink) stopRelay(ctx context.Context) {
	_, _ = l.From.Run(ctx, "pkill", "-f", relayPath+" -listen "+l.listen+" ")
}

// copyRelay builds ./relay as a static binary from the checkout (Go's
// build cache makes it quick after the first time) into a folder of this
// call's own, so runs side by side never swap binaries, and copies it into
// container.
func copyRelay(ctx context.Context, container string) error {
	root, err := source.Root()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "skewer-relay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "skewer-relay")
	cmd := run.Command("go", "build", "-o", out, "./harness/faults/relay")
	cmd.Dir, cmd.Env = root, []string{"CGO_ENABLED=0"}
	if err := cmd.Run(ctx); err != nil {
		return fmt.Errorf("failed to build the relay: %w", err)
	}
	return docker.Copy(ctx, out, container, relayPath)
}
