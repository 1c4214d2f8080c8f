package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// backendServer is a real TLS server that answers /healthz and says who it
// is on every other path, so a test sees where the balancer sent it.
type backendServer struct {
	*httptest.Server
	name    string
	healthy atomic.Bool
}

func newBackend(t *testing.T, name string) *backendServer {
	b := &backendServer{name: name}
	b.healthy.Store(true)
	b.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && !b.healthy.Load() {
			http.Error(w, "not ok", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, b.name)
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backendServer) addr() string { return strings.TrimPrefix(b.URL, "https://") }

// writeConfig writes LDS and CDS the way kind does: to a temporary file,
// then renamed over the old one.
func writeConfig(t *testing.T, dir string, backends ...string) (lds, cds string) {
	lds, cds = filepath.Join(dir, "lds.yaml"), filepath.Join(dir, "cds.yaml")
	var eps strings.Builder
	for _, b := range backends {
		host, port, _ := net.SplitHostPort(b)
		fmt.Fprintf(&eps, "      - endpoint:\n          address:\n            socket_address:\n              address: %s\n              port_value: %s\n", host, port)
	}
	ldsBody := `resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: listener_apiserver
  address:
    socket_address:
      address: "127.0.0.1"
      port_value: 0
  filter_chains:
  - filters:
    - name: envoy.filters.network.tcp_proxy
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
        stat_prefix: ingress_tcp
        cluster: kube_apiservers
`
	cdsBody := `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: kube_apiservers
  connect_timeout: 0.25s
  type: STRICT_DNS
  lb_policy: ROUND_ROBIN
  health_checks:
  - timeout: 1s
    interval: 0.1s
    unhealthy_threshold: 2
    healthy_threshold: 1
    http_health_check:
      path: /healthz
    transport_socket_match_criteria:
      tls_mode: "true"
  load_assignment:
    cluster_name: kube_apiservers
    endpoints:
    - lb_endpoints:
` + eps.String()
	for path, body := range map[string]string{lds: ldsBody, cds: cdsBody} {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	return lds, cds
}

func get(t *testing.T, addr string) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: insecureTLS(), DisableKeepAlives: true}}
	resp, err := client.Get("https://" + addr + "/who")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// eventually polls cond for up to 5 s; the balancer's work is asynchronous.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within 5s; last observed: %s", what, last)
}

func seen(t *testing.T, addr string, n int) map[string]int {
	got := map[string]int{}
	for i := 0; i < n; i++ {
		who, err := get(t, addr)
		if err != nil {
			got["error: "+err.Error()]++
			continue
		}
		got[who]++
	}
	return got
}

func TestBalancerRoutesToHealthyBackendsAndFollowsConfig(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b, c := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")
	dir := t.TempDir()
	lds, cds := writeConfig(t, dir, a.addr(), b.addr())
	bal := NewBalancer(ctx)
	go func() { _ = follow(ctx, bal, lds, cds, 20*time.Millisecond) }()
	var addr string
	eventually(t, "listener bound", func() (bool, string) { addr = bal.Addr("listener_apiserver"); return addr != "", bal.Status() })

	eventually(t, "round robin over a and b", func() (bool, string) {
		got := seen(t, addr, 6)
		return got["a"] == 3 && got["b"] == 3, fmt.Sprint(got)
	})

	// A failing health check takes a backend out of rotation.
	b.healthy.Store(false)
	eventually(t, "only a while b fails /healthz", func() (bool, string) {
		got := seen(t, addr, 4)
		return got["a"] == 4, fmt.Sprint(got)
	})
	b.healthy.Store(true)

	// kind rewrites CDS to replace a node: the balancer follows the rename.
	writeConfig(t, dir, a.addr(), c.addr())
	eventually(t, "c replaces b", func() (bool, string) {
		got := seen(t, addr, 6)
		return got["a"] == 3 && got["c"] == 3, fmt.Sprint(got)
	})

	// A backend that dies is skipped, even before its health check notices.
	a.Close()
	eventually(t, "every request served by c after a died", func() (bool, string) {
		got := seen(t, addr, 4)
		return got["c"] == 4, fmt.Sprint(got)
	})
}

func TestLoadConfigRejectsListenerWithoutCluster(t *testing.T) {
	dir := t.TempDir()
	lds := filepath.Join(dir, "lds.yaml")
	cds := filepath.Join(dir, "cds.yaml")
	os.WriteFile(lds, []byte("resources:\n- name: l\n  address: {socket_address: {address: 0.0.0.0, port_value: 6443}}\n"), 0o644)
	os.WriteFile(cds, []byte("resources: []\n"), 0o644)
	if _, err := loadConfig(lds, cds); err == nil || !strings.Contains(err.Error(), "names no cluster") {
		t.Fatalf("want an error naming the missing cluster, got %v", err)
	}
}

func TestLoadConfigReadsKindBootstrap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "envoy.yaml")
	os.WriteFile(path, []byte(`node:
  cluster: kind
  id: kind-external-load-balancer
dynamic_resources:
  cds_config:
    resource_api_version: V3
    path_config_source:
      path: /home/envoy/cds.yaml
  lds_config:
    resource_api_version: V3
    path_config_source:
      path: /home/envoy/lds.yaml
admin:
  access_log_path: /dev/stdout
  address:
    socket_address:
      address: 0.0.0.0
      port_value: 10000
`), 0o644)
	var boot bootstrap
	if err := readYAML(path, &boot); err != nil {
		t.Fatal(err)
	}
	if got := boot.DynamicResources.CDSConfig.path(); got != "/home/envoy/cds.yaml" {
		t.Errorf("cds path = %q", got)
	}
	if got := boot.DynamicResources.LDSConfig.path(); got != "/home/envoy/lds.yaml" {
		t.Errorf("lds path = %q", got)
	}
	if got := boot.Admin.Address.String(); got != "0.0.0.0:10000" {
		t.Errorf("admin = %q", got)
	}
}
