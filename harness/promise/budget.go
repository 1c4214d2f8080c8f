package promise

import (
	"errors"
	"fmt"
	"time"
)

// Budget is what a rollout may cost the clients of the load balancer:
// the bounds rollout.disruption-budget holds the traffic to.
type Budget struct {
	// MaxFailed is the share (0 to 1) of requests through the load
	// balancer that may fail - a 5xx, a 403 or no response at all - on new and
	// on reused connections alike.
	MaxFailed float64 `json:"max_failed"`
	// MaxUnavailable bounds the longest unavailability of new connections
	// through the load balancer: how long a client arriving then found no
	// apiserver to serve it. Zero measures it without a bound.
	MaxUnavailable time.Duration `json:"max_unavailable"`
	// MaxUnavailableReused bounds it for a kept-alive connection. Zero
	// measures it without a bound. A layer-4 balancer leaves an
	// established connection on its backend while that backend restarts
	// (Envoy does not close connections on a failed health check by
	// default), so it is the rollout that must move such a client.
	MaxUnavailableReused time.Duration `json:"max_unavailable_reused"`
}

// DefaultBudget is the repository's budget: KEP-4020's objective of 99%
// of requests answered without a 5xx, and a new client locked out no
// longer than kind's load balancer takes to drop a failing backend (a
// health check every 2 s, out after 2 failures of up to 3 s: 10 s) plus
// the one request of the client's own that timed out meanwhile (5 s).
// A kept-alive client gets the same bound: every step that stops an
// apiserver takes it out of the load balancer and stops it gracefully
// first, and the GOAWAY that sends makes the client reconnect through the
// balancer (kubeadm#2991's advice), so it meets at most what a new client
// meets. Without that it stays on the backend for the backend's whole
// outage (1m10s measured in place before the harness did it).
var DefaultBudget = Budget{MaxFailed: 0.01, MaxUnavailable: 15 * time.Second, MaxUnavailableReused: 15 * time.Second}

// Validate refuses bounds no traffic could be held to.
func (b Budget) Validate() error {
	var errs []error
	if !(b.MaxFailed >= 0 && b.MaxFailed <= 1) { // NaN too: JSON could not even record it
		errs = append(errs, fmt.Errorf("the share of failed requests allowed is %g; want 0 to 1 (0%% to 100%%)", b.MaxFailed))
	}
	if b.MaxUnavailable < 0 || b.MaxUnavailableReused < 0 {
		errs = append(errs, fmt.Errorf("a bound on unavailability is negative (%s, %s)", b.MaxUnavailable, b.MaxUnavailableReused))
	}
	return errors.Join(errs...)
}

func (b Budget) String() string {
	bound := func(d time.Duration) string {
		if d == 0 {
			return "measured, not bounded"
		}
		return "at most " + d.String()
	}
	return fmt.Sprintf("at most %g%% of requests failed; longest unavailable: new connections %s, reused %s",
		100*b.MaxFailed, bound(b.MaxUnavailable), bound(b.MaxUnavailableReused))
}
