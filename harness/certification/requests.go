package certification

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// Attempt is one request made while a fault holds.
type Attempt struct {
	At      time.Duration // since the probe began
	Sent    time.Time     // when, by the clock the cluster's logs use
	Code    int           // HTTP status; 0 when no response came
	Took    time.Duration
	Message string
	// AuditID is the Audit-ID the request named, where it named one.
	AuditID string
}

func (a Attempt) String() string {
	return fmt.Sprintf("+%s %d in %s %s", a.At.Round(100*time.Millisecond), a.Code, a.Took.Round(10*time.Millisecond), a.Message)
}

// Probe lists the window's resource through s every interval for d, each
// request given timeout, and says how each ended; the Audit-Id of each
// response goes to ids when it is given.
func (w *Window) Probe(ctx context.Context, s Server, d, interval, timeout time.Duration, ids ...*auditIDs) ([]Attempt, error) {
	api, err := w.api(s.WithTimeout(timeout), "default", ids...)
	if err != nil {
		return nil, err
	}
	var out []Attempt
	start := time.Now()
	err = wait.Sample(ctx, d, interval, func() bool {
		out = append(out, Try(start, func() error {
			_, err := api.List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}))
		return true
	})
	return out, err
}

// Try makes one request with fn and says how it ended, start being when
// the probing began.
func Try(start time.Time, fn func() error) Attempt {
	a := Attempt{At: time.Since(start), Sent: time.Now()}
	t0 := time.Now()
	err := fn()
	a.Took = time.Since(t0)
	var st apierrors.APIStatus
	switch {
	case err == nil:
		a.Code = 200
	case errors.As(err, &st):
		a.Code, a.Message = int(st.Status().Code), st.Status().Message
	default:
		a.Message = err.Error()
	}
	if len(a.Message) > 120 {
		a.Message = a.Message[:120] + "..."
	}
	return a
}

// Codes counts attempts by code.
func Codes(as []Attempt) map[int]int {
	n := map[int]int{}
	for _, a := range as {
		n[a.Code]++
	}
	return n
}

// messages are the distinct answers of attempts that failed, in order,
// each with when it was first seen.
func messages(as []Attempt) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range as {
		if a.Code != 200 && !seen[a.Message] {
			seen[a.Message] = true
			out = append(out, fmt.Sprintf("%d %q from +%s", a.Code, a.Message, a.At.Round(100*time.Millisecond)))
		}
	}
	return out
}

// askingDeadline makes every request of cfg ask the server for deadline
// (?timeout=), whatever the client itself waits (cfg.Timeout, which
// client-go would otherwise ask for).
func askingDeadline(cfg *rest.Config, deadline time.Duration) *rest.Config {
	return editingRequests(cfg, func(req *http.Request) {
		q := req.URL.Query()
		q.Set("timeout", deadline.String())
		req.URL.RawQuery = q.Encode()
	})
}

// namingAuditID makes every request of cfg name auditID as its Audit-ID,
// which kube-apiserver takes as the request's audit ID.
func namingAuditID(cfg *rest.Config, auditID string) *rest.Config {
	return editingRequests(cfg, func(req *http.Request) { req.Header.Set("Audit-ID", auditID) })
}

// editingRequests is a copy of cfg whose every request edit changes, on a
// clone of it, before it is sent.
func editingRequests(cfg *rest.Config, edit func(*http.Request)) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			edit(req)
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// withFault runs fn from a working route (RouteWorks) with f injected,
// and reverts f however fn ends.
func withFault(ctx context.Context, c *cluster.Cluster, w *Window, f faults.Fault, fn func() error) error {
	if _, err := w.RouteWorks(ctx, "default"); err != nil {
		return fmt.Errorf("before %s: %w", f.Name(), err)
	}
	return injected(ctx, c, f, fn)
}

// injected runs fn with f injected, and reverts f however fn ends.
func injected(ctx context.Context, c *cluster.Cluster, f faults.Fault, fn func() error) error {
	if err := f.Inject(ctx, c); err != nil {
		_ = f.Revert(context.WithoutCancel(ctx), c)
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	ferr := fn()
	if err := f.Revert(context.WithoutCancel(ctx), c); err != nil {
		return fmt.Errorf("reverting %s: %w", f.Name(), err)
	}
	return ferr
}
