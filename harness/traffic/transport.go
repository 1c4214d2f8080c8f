package traffic

import (
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// newConnections makes a client built from cfg dial a new connection for
// every request: its own transport (a Dial of its own keeps client-go from
// sharing a cached one) and every request asking to close its connection
// after the response, which HTTP/2 honours as well as HTTP/1.1.
func newConnections(cfg *rest.Config) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	cfg.Dial = dialer.DialContext
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return closeEach{rt} })
}

type closeEach struct{ rt http.RoundTripper }

func (c closeEach) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Close = true
	return c.rt.RoundTrip(req)
}

func (c closeEach) CancelRequest(req *http.Request) { cancel(c.rt, req) }

// auditID keeps the Audit-Id the apiserver gave the latest response of
// one stream's client (a stream makes one request at a time), so a record
// can be found in the audit logs.
type auditID struct {
	mu   sync.Mutex
	last string
}

func (a *auditID) wrap(rt http.RoundTripper) http.RoundTripper { return auditIDRoundTripper{a, rt} }

// take is the latest response's Audit-Id, once: "" when no response came.
func (a *auditID) take() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.last
	a.last = ""
	return id
}

type auditIDRoundTripper struct {
	a  *auditID
	rt http.RoundTripper
}

func (k auditIDRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := k.rt.RoundTrip(req)
	if resp != nil {
		k.a.mu.Lock()
		k.a.last = resp.Header.Get("Audit-Id")
		k.a.mu.Unlock()
	}
	return resp, err
}

func (k auditIDRoundTripper) CancelRequest(req *http.Request) { cancel(k.rt, req) }

// cancel passes a timed-out request's cancellation on to rt, as client-go's
// own round trippers do: one that cannot take it makes them log a warning
// on every timeout.
func cancel(rt http.RoundTripper, req *http.Request) {
	if c, ok := rt.(interface{ CancelRequest(*http.Request) }); ok {
		c.CancelRequest(req)
	}
}
