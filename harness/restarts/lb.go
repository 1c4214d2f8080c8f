package restarts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/internal/docker"
)

// lbConn is a line of skewer's load-balancer stand-in about one
// connection (docker logs --timestamps): "<time> <its own time> conn
// FROM:PORT -> TO:PORT opened" or "... closed after ...".
var lbConn = regexp.MustCompile(`^(\S+) .* conn ((\S+):\d+) -> (\S+):\d+ (opened|closed)`)

// conn is one connection through the load balancer: the backend address
// it is on, and when it opened.
type conn struct {
	to     string
	opened time.Time
}

func (c conn) String() string { return c.to + " since " + c.opened.UTC().Format("15:04:05") }

// openAt reads a load balancer's log and returns, of the connections
// from the address from still open at t, each one's backend and when it
// opened, in the order they opened.
func openAt(log, from string, t time.Time) []conn {
	open := map[string]conn{} // by FROM:PORT, unique while open
	var order []string
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		m := lbConn.FindStringSubmatch(sc.Text())
		if m == nil || m[3] != from {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || at.After(t) {
			continue
		}
		if route := m[2]; m[5] == "opened" {
			open[route] = conn{m[4], at}
			order = append(order, route)
		} else {
			delete(open, route)
		}
	}
	var out []conn
	for _, r := range order {
		if c, ok := open[r]; ok {
			out = append(out, c)
			delete(open, r)
		}
	}
	return out
}

// lbHost is the load balancer a kubelet's error lines name
// (https://HOST:6443/...), "" when none does.
func lbHost(lines []string) string {
	for _, l := range lines {
		i := strings.Index(l, "https://")
		if i < 0 {
			continue
		}
		end := strings.IndexAny(l[i:], `"\ `)
		if end < 0 {
			end = len(l) - i
		}
		u, err := url.Parse(strings.TrimRight(l[i:i+end], `\`))
		if err == nil && u.Hostname() != "" {
			return u.Hostname()
		}
	}
	return ""
}

// readConnections says which apiservers node's connections through the
// load balancer its kubelet's error lines name were on at at: the
// backend of each connection from the node's address still open then,
// by node name. Only skewer's stand-in logs its connections; with any
// other load balancer there is nothing to read.
func (m *Monitor) readConnections(ctx context.Context, node string, errors []string, at time.Time) ([]string, error) {
	lb := lbHost(errors)
	if lb == "" {
		return nil, nil
	}
	nodes, err := m.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	var from string
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				names[a.Address] = n.Name
				if n.Name == node {
					from = a.Address
				}
			}
		}
	}
	if from == "" {
		return nil, fmt.Errorf("no InternalIP for %s", node)
	}
	var logged bytes.Buffer
	if err := docker.Logs(ctx, lb, &logged); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range openAt(logged.String(), from, at) {
		if name := names[c.to]; name != "" {
			c.to = name
		}
		out = append(out, c.String())
	}
	sort.Strings(out)
	return out, nil
}
