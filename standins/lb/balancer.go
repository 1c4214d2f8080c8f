package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// backend is one upstream address and its health.
type backend struct {
	addr      string
	healthy   atomic.Bool
	successes int // consecutive, owned by the checker goroutine
	failures  int
	stop      context.CancelFunc
}

// cluster is the live state of a Cluster.
type cluster struct {
	mu       sync.Mutex
	spec     Cluster
	backends map[string]*backend
	next     uint64
}

// candidates orders backends for one connection: healthy ones first, in
// round-robin order, then the rest, so a connection still has somewhere to
// go while health checks catch up (where Envoy would enter panic mode).
func (c *cluster) candidates() []*backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs := make([]string, 0, len(c.backends))
	for a := range c.backends {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	n := len(addrs)
	if n == 0 {
		return nil
	}
	start := int(c.next % uint64(n))
	c.next++
	var healthy, unhealthy []*backend
	for i := 0; i < n; i++ {
		b := c.backends[addrs[(start+i)%n]]
		if b.healthy.Load() || c.spec.Health == nil {
			healthy = append(healthy, b)
		} else {
			unhealthy = append(unhealthy, b)
		}
	}
	return append(healthy, unhealthy...)
}

// Balancer serves the listeners of the current Config.
type Balancer struct {
	ctx       context.Context
	mu        sync.Mutex
	clusters  map[string]*cluster
	listeners map[string]*liveListener // by name
}

type liveListener struct {
	spec Listener
	ln   net.Listener
}

// NewBalancer returns a Balancer that stops everything when ctx ends.
func NewBalancer(ctx context.Context) *Balancer {
	return &Balancer{ctx: ctx, clusters: map[string]*cluster{}, listeners: map[string]*liveListener{}}
}

// Apply moves the Balancer to cfg: new listeners open, removed ones close,
// backends keep their health across generations.
func (b *Balancer) Apply(cfg *Config) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, spec := range cfg.Clusters {
		c := b.clusters[name]
		if c == nil {
			c = &cluster{backends: map[string]*backend{}}
			b.clusters[name] = c
		}
		b.updateCluster(c, spec)
	}
	for name, c := range b.clusters {
		if _, ok := cfg.Clusters[name]; !ok {
			b.updateCluster(c, Cluster{Name: name})
			delete(b.clusters, name)
		}
	}
	wanted := map[string]bool{}
	var errs []error
	for _, spec := range cfg.Listeners {
		wanted[spec.Name] = true
		if l := b.listeners[spec.Name]; l != nil {
			if l.spec.Address == spec.Address {
				l.spec = spec
				continue
			}
			l.ln.Close()
		}
		ln, err := net.Listen("tcp", spec.Address)
		if err != nil {
			errs = append(errs, fmt.Errorf("listener %s: %w", spec.Name, err))
			delete(b.listeners, spec.Name)
			continue
		}
		l := &liveListener{spec: spec, ln: ln}
		b.listeners[spec.Name] = l
		log.Printf("listener %s on %s -> cluster %s", spec.Name, ln.Addr(), spec.Cluster)
		go b.serve(l)
	}
	for name, l := range b.listeners {
		if !wanted[name] {
			l.ln.Close()
			delete(b.listeners, name)
		}
	}
	return errors.Join(errs...)
}

func (b *Balancer) updateCluster(c *cluster, spec Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	healthChanged := fmt.Sprint(c.spec.Health) != fmt.Sprint(spec.Health)
	c.spec = spec
	wanted := map[string]bool{}
	for _, addr := range spec.Backends {
		wanted[addr] = true
		if old := c.backends[addr]; old != nil && !healthChanged {
			continue
		} else if old != nil {
			old.stop()
		}
		be := &backend{addr: addr}
		ctx, cancel := context.WithCancel(b.ctx)
		be.stop = cancel
		c.backends[addr] = be
		if spec.Health != nil {
			go check(ctx, spec.Name, be, *spec.Health)
		}
		log.Printf("cluster %s: backend %s added", spec.Name, addr)
	}
	for addr, be := range c.backends {
		if !wanted[addr] {
			be.stop()
			delete(c.backends, addr)
			log.Printf("cluster %s: backend %s removed", spec.Name, addr)
		}
	}
}

// Addr returns the bound address of a listener (for tests and logs).
func (b *Balancer) Addr(name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.listeners[name]; l != nil {
		return l.ln.Addr().String()
	}
	return ""
}

// Status describes every backend's health, one per line.
func (b *Balancer) Status() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var lines []string
	for name, c := range b.clusters {
		c.mu.Lock()
		for addr, be := range c.backends {
			lines = append(lines, fmt.Sprintf("%s::%s::health_flags::%s", name, addr, map[bool]string{true: "healthy", false: "/failed_active_hc"}[be.healthy.Load()]))
		}
		c.mu.Unlock()
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func (b *Balancer) serve(l *liveListener) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		go b.proxy(conn, l)
	}
}

func (b *Balancer) proxy(down net.Conn, l *liveListener) {
	defer down.Close()
	b.mu.Lock()
	c := b.clusters[l.spec.Cluster]
	b.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	timeout := c.spec.ConnectTimeout
	c.mu.Unlock()
	var up net.Conn
	var tried []string
	for _, be := range c.candidates() {
		var err error
		up, err = net.DialTimeout("tcp", be.addr, timeout)
		if err == nil {
			break
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", be.addr, err))
	}
	if up == nil {
		log.Printf("conn %s: no backend took it: %s", down.RemoteAddr(), strings.Join(tried, ", "))
		return
	}
	defer up.Close()
	// Each connection's backend and how it ended are logged, so a client
	// whose requests went unanswered can be traced to the apiserver its
	// connection was on.
	start, route := time.Now(), fmt.Sprintf("conn %s -> %s", down.RemoteAddr(), up.RemoteAddr())
	log.Printf("%s opened", route)
	type ended struct {
		side  string
		bytes int64
	}
	done := make(chan ended, 2)
	pipe := func(dst, src net.Conn, side string) {
		n, _ := io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- ended{side, n}
	}
	go pipe(up, down, "client")
	go pipe(down, up, "backend")
	first, second := <-done, <-done
	sent := map[string]int64{first.side: first.bytes, second.side: second.bytes}
	log.Printf("%s closed after %s, the %s ended first (client sent %d B, backend %d B)", route, time.Since(start).Round(time.Millisecond),
		first.side, sent["client"], sent["backend"])
}

// check runs the active health check of one backend until ctx ends.
func check(ctx context.Context, clusterName string, be *backend, hc HealthCheck) {
	scheme := "http"
	if hc.TLS {
		scheme = "https"
	}
	client := &http.Client{
		Timeout: hc.Timeout,
		Transport: &http.Transport{
			// Envoy's kind config says ACCEPT_UNTRUSTED: this is a liveness
			// probe, not an identity check.
			TLSClientConfig:   insecureTLS(),
			DisableKeepAlives: true,
		},
	}
	url := scheme + "://" + be.addr + hc.Path
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok := probe(ctx, client, url)
		if ok {
			be.successes, be.failures = be.successes+1, 0
			if !be.healthy.Load() && be.successes >= hc.HealthyThreshold {
				be.healthy.Store(true)
				log.Printf("cluster %s: backend %s healthy", clusterName, be.addr)
			}
		} else {
			be.successes, be.failures = 0, be.failures+1
			if be.healthy.Load() && be.failures >= hc.UnhealthyThreshold {
				be.healthy.Store(false)
				log.Printf("cluster %s: backend %s unhealthy", clusterName, be.addr)
			}
		}
		t.Reset(hc.Interval)
	}
}

func probe(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec
