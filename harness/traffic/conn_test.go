package traffic

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// A client made with newConnections dials once per request, over HTTP/2
// as apiservers serve it; a plain client keeps one connection.
func TestNewConnectionsDialPerRequest(t *testing.T) {
	var conns atomic.Int32
	protos := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos[r.Proto] = true
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()

	for _, tc := range []struct {
		fresh bool
		want  int32
	}{{fresh: false, want: 1}, {fresh: true, want: 3}} {
		conns.Store(0)
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		if tc.fresh {
			newConnections(cfg)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(context.Background()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		if got := conns.Load(); got != tc.want {
			t.Errorf("new connections %v: 3 requests took %d connection(s), want %d", tc.fresh, got, tc.want)
		}
	}
	if !protos["HTTP/2.0"] || len(protos) != 1 {
		t.Errorf("protocols %v, want HTTP/2.0 only", protos)
	}
}

// The streams end with the context the traffic was started with, and with
// end (which Delete calls): a run that fails or is interrupted before Stop
// does not leave them writing into a cluster being exported and deleted.
func TestStreamsEndWithTheirContext(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	opts := Options{Namespace: "ns", Interval: 10 * time.Millisecond, DirectInterval: 10 * time.Millisecond, Timeout: time.Second}
	ended := func(tr *Traffic) bool {
		done := make(chan struct{})
		go func() { tr.wg.Wait(); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	run, cancel := context.WithCancel(context.Background())
	tr := newTraffic(run, &cluster.Cluster{Name: "c"}, opts)
	tr.startStreams("lb", &rest.Config{Host: srv.URL})
	for requests.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if !ended(tr) {
		t.Fatal("the streams outlived the context the traffic was started with")
	}

	tr = newTraffic(context.Background(), &cluster.Cluster{Name: "c"}, opts)
	tr.startStreams("lb", &rest.Config{Host: srv.URL})
	tr.end()
	if !ended(tr) {
		t.Fatal("the streams outlived end")
	}
}
