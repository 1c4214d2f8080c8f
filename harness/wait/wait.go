// Package wait is the harness's one way to wait for a cluster's state: a
// condition polled under a budget from one table of timeouts, and a
// timeout that says what was awaited and what was last seen, never just
// "timed out". It imports only the standard library and apimachinery, so
// that every harness package can use it.
package wait

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Condition reports whether what is awaited has happened and, when it has
// not, the state it saw (e.g. "2 updated, 1 available of 3", "its
// apiserver reports v1.35.4"). An error ends the wait at once.
type Condition func(ctx context.Context) (done bool, state string, err error)

// For waits, under the budget named name, until cond is done. On timeout
// the error says what was awaited, for how long, and the last state
// observed. When ctx is cancelled (not the budget) the error wraps
// ctx.Err() and still says what was awaited and the last state. An error
// returned by cond is returned at once, wrapped with what was awaited.
func For(ctx context.Context, name, what string, cond Condition) error {
	b, err := Named(name)
	if err != nil {
		return fmt.Errorf("failed to wait for %s: %w", what, err)
	}
	return Within(ctx, b, what, cond)
}

// Within is For with an explicit budget, for budgets that are user input
// (a migration's stop condition); it validates b first.
func Within(ctx context.Context, b Budget, what string, cond Condition) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("failed to wait for %s: %w", what, err)
	}
	p := poll{cond: cond, interval: b.Interval}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, b.Interval, b.Timeout, true, p.check)
	switch {
	case err == nil:
		return nil
	case p.err != nil:
		return fmt.Errorf("failed to wait for %s: %w", what, p.err)
	case ctx.Err() != nil:
		// The caller gave up, not the budget: say so, and keep its reason.
		return fmt.Errorf("stopped waiting for %s after %s: %w: last seen: %s",
			what, time.Since(start).Round(time.Millisecond), ctx.Err(), p.lastSeen())
	default:
		return fmt.Errorf("timed out after %s waiting for %s: last seen: %s", b.Timeout, what, p.lastSeen())
	}
}

// poll is one wait's memory of what its condition last said.
type poll struct {
	cond     Condition
	interval time.Duration
	last     string
	err      error
}

func (p *poll) check(ctx context.Context) (bool, error) {
	done, state, err := p.cond(ctx)
	switch {
	case state == "" || state == p.last:
	case p.last != "" && p.cutShort(ctx):
		// A look the budget cut short often sees only its own failed
		// read (conditions report a read error as their state): keep
		// what the look before it saw, and say what this one did.
		p.last += "; then: " + state
	default:
		p.last = state
	}
	if err != nil && p.cutShort(ctx) {
		// A call the budget (or the caller) cut short says nothing about
		// the state: the wait ends as a timeout or a cancellation, with
		// the last state the condition did see.
		return false, nil
	}
	p.err = err
	return done, err
}

// cutShort says whether a call's error may be the end of the budget
// rather than the state: the context is done, or its deadline comes
// before the next look - client-go's rate limiter refuses a request it
// would have to delay past the deadline ("rate: Wait(n=1) would exceed
// context deadline") while the context is still live.
func (p *poll) cutShort(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < p.interval
}

func (p *poll) lastSeen() string {
	if p.last == "" {
		return "nothing observed"
	}
	return p.last
}
