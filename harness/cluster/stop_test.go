package cluster

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// What an apiserver's /readyz/shutdown answers, as KillOnceStopping's
// client sees it: only a failing check or a server no longer listening
// means it has begun to stop.
func TestStoppingIsAFailedShutdownCheckOrNoListener(t *testing.T) {
	serve := func(code int, body string) *httptest.Server {
		return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/readyz/shutdown" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
		}))
	}
	ask := func(t *testing.T, host string, trusted *httptest.Server) error {
		cfg := &rest.Config{Host: host}
		if trusted != nil {
			cfg.Transport = trusted.Client().Transport
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return health(context.Background(), cs, "/readyz/shutdown")
	}
	// A listener that accepts and closes at once, as Docker's proxy of a
	// published port does when nothing listens behind it.
	closing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer closing.Close()
	go func() {
		for {
			conn, err := closing.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	gone.Close()

	ok, failing, forbidden := serve(200, "ok"), serve(500, "[-]shutdown failed: reason withheld\nreadyz check failed"), serve(403, `{"kind":"Status","code":403}`)
	defer ok.Close()
	defer failing.Close()
	defer forbidden.Close()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"serving", ask(t, ok.URL, ok), false},
		{"shutdown check failing", ask(t, failing.URL, failing), true},
		{"forbidden while its authorizer syncs", ask(t, forbidden.URL, forbidden), false},
		{"untrusted certificate", ask(t, ok.URL, nil), false},
		{"connection refused", ask(t, "https://"+goneAddr, ok), true},
		{"accepted and closed by a proxy", ask(t, "https://"+closing.Addr().String(), ok), true},
	} {
		if got := stopping(c.err); got != c.want {
			t.Errorf("%s (%v): stopping %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
