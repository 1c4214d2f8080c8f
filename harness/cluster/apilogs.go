package cluster

import (
	"bufio"
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

	"github.com/skewer-k8s/skewer/internal/docker"
)

func (l layout) apiserverLogs() string { return filepath.Join(l.dir, "apiserver-logs") }

// apiserverLogScript runs in a control plane: it follows every apiserver
// container's CRI log file as it appears (a replaced static Pod gets a
// directory of its own; kubelet's rotation keeps the file's name), each
// line prefixed with its file, until its stdin closes. tail -F keeps
// reading a file until it is deleted, so a replaced apiserver's last
// lines are read before kubelet removes them.
const apiserverLogScript = `seen=" "
follow() {
  while :; do
    for f in /var/log/pods/kube-system_kube-apiserver-*/kube-apiserver/*.log; do
      [ -e "$f" ] || continue
      case "$seen" in *" $f "*) continue ;; esac
      seen="$seen$f "
      tail -n +1 -F "$f" 2>/dev/null | sed -u "s|^|$f |" &
    done
    sleep 1
  done
}
follow & f=$!
cat >/dev/null
kill $f; pkill -f 'tail -n [+]1 -F /var/log/pods/kube-system_kube-apiserver-'`

// KeepAPIServerLogs follows the log of every apiserver container of every
// control plane - those that join later too - into a file per node under
// the cluster's directory, until stop is called. kubelet deletes the log
// of a static Pod that kubeadm replaces, and a surge removes whole nodes:
// kept here, an apiserver's log outlives both, and APIServerLog reads it
// after the fact (what an old apiserver logged at the moment of a false
// 404, say). The control planes are listed again when a node is added
// through this Cluster (addNodeContainer), and every 30 s for one added
// otherwise: a listing is a docker CLI, and one every 5 s was most of the
// harness's own calls under traffic (session 32). A joiner's apiserver
// starts well after its container, and its log is read from its first line.
func (c *Cluster) KeepAPIServerLogs(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	followed := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			if nodes, err := c.byRole(RoleControlPlane); err == nil {
				for _, n := range nodes {
					if !followed[n.Name] {
						followed[n.Name] = true
						wg.Add(1)
						go func() {
							defer wg.Done()
							_ = c.followAPIServerLog(ctx, n.Name)
						}()
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-c.grown():
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// followAPIServerLog appends node's apiserver log lines to its file on the
// host until ctx ends (then the follower in the node is stopped by
// closing its stdin; a node that does not answer is left after a grace)
// or the node's container goes.
func (c *Cluster) followAPIServerLog(ctx context.Context, node string) error {
	dir := layout{c.Dir}.apiserverLogs()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, node+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	stdin, closeStdin := io.Pipe()
	execCtx, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	go func() {
		<-ctx.Done()
		closeStdin.Close()
		time.AfterFunc(10*time.Second, kill)
	}()
	return docker.ExecStream(execCtx, node, stdin, f, "sh", "-c", apiserverLogScript)
}

// LogLine is one line an apiserver wrote: the container's log file it was
// kept from (one per apiserver container), when containerd received it,
// and what it said.
type LogLine struct {
	Source string
	Time   time.Time
	Text   string
}

// APIServerLog is every line KeepAPIServerLogs kept of node's apiservers,
// in the order they were kept; none when nothing was kept.
func (c *Cluster) APIServerLog(node string) ([]LogLine, error) {
	f, err := os.Open(filepath.Join(layout{c.Dir}.apiserverLogs(), node+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []LogLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if l, ok := parseKeptLine(sc.Text()); ok {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("the kept apiserver log of %s: %w", node, err)
	}
	return out, nil
}

// Handovers are the moments a node's kept apiserver log shows one
// apiserver container giving way to another: the last line of each
// container's log but the one that started last, and the first line of
// each but the one that started first, in time order. Two apiservers
// cannot serve a node's port at once, so a request the node's apiserver
// received before a handover and never ended was held by a process that
// is gone - stopped, killed, or replaced by its kubelet - even when the
// next one starts too soon for its audit log to fall silent.
func Handovers(lines []LogLine) []time.Time {
	type span struct{ first, last time.Time }
	spans := map[string]*span{}
	var order []string
	for _, l := range lines {
		sp := spans[l.Source]
		if sp == nil {
			sp = &span{first: l.Time, last: l.Time}
			spans[l.Source] = sp
			order = append(order, l.Source)
		}
		if l.Time.Before(sp.first) {
			sp.first = l.Time
		}
		if l.Time.After(sp.last) {
			sp.last = l.Time
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return spans[order[i]].first.Before(spans[order[j]].first) })
	var out []time.Time
	for i, src := range order {
		if i > 0 {
			out = append(out, spans[src].first)
		}
		if i < len(order)-1 {
			out = append(out, spans[src].last)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// parseKeptLine reads "<file> <time> <stream> <tag> <text>", a CRI log
// line behind the file it came from.
func parseKeptLine(s string) (LogLine, bool) {
	parts := strings.SplitN(s, " ", 5)
	if len(parts) < 4 {
		return LogLine{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, parts[1])
	if err != nil {
		return LogLine{}, false
	}
	l := LogLine{Source: parts[0], Time: t}
	if len(parts) == 5 {
		l.Text = parts[4]
	}
	return l, true
}
