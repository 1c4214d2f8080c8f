package suite

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// grace is how long the tests have, once their context is cancelled, to
// return and run their cleanups (a fault's Revert) before the harness
// stops waiting for them.
const grace = 2 * time.Minute

var (
	// errInterrupted is the tests' context's cause after Ctrl-C or SIGTERM.
	errInterrupted = errors.New("interrupted")
	// errDeadline is its cause when the harness's own deadline passes.
	errDeadline = errors.New("harness deadline before go test's -timeout")
)

// processStart is when the test binary started: go test kills it at
// -timeout plus a minute from then, so the harness deadline counts from
// here too.
var processStart = time.Now()

// budget is how long after the start the harness stops the tests itself:
// go test's -timeout panics and exits, skipping teardown, so the cluster
// would leak and the report be lost. It is timeout less max(5 minutes,
// 10%), never below half of timeout; 0 (no timeout) gives 0, no deadline.
func budget(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	margin := max(5*time.Minute, timeout/10)
	return max(timeout-margin, timeout/2)
}

// goTestTimeout is go test's -timeout, 0 when there is none.
func goTestTimeout() time.Duration {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return 0
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			return d
		}
	}
	return 0
}

// exitCode is the exit code of a run whose tests returned code, given why
// the tests' context ended (nil: it did not): 130 after a signal, as a
// shell reports Ctrl-C, and a failure after the harness deadline.
func exitCode(code int, cause error) int {
	switch {
	case errors.Is(cause, errInterrupted):
		return 130
	case cause != nil && code == 0:
		return 1
	}
	return code
}

// stopper owns the tests' context. The first Ctrl-C or SIGTERM, or the
// harness deadline, cancels it: a step waiting on its ctx fails, so the
// running test returns, its cleanups run and the normal teardown follows.
// A second signal, or tests still running grace after the cancellation,
// take the hard path: teardown now, then exit.
type stopper struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	grace  time.Duration
	// hard tears down and exits; it returns only in tests.
	hard func(cause error)
	out  io.Writer

	returned chan struct{} // closed when the tests have returned
	over     chan struct{} // closed when the run is over
	release  func()
}

// startStopper catches SIGINT and SIGTERM until close, and cancels the
// tests' context at processStart+deadline unless deadline is 0.
func startStopper(deadline time.Duration, hard func(cause error)) *stopper {
	p := newStopper(hard)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var timeUp <-chan time.Time
	stopTimer := func() bool { return false }
	if deadline > 0 {
		t := time.NewTimer(time.Until(processStart.Add(deadline)))
		timeUp, stopTimer = t.C, t.Stop
	}
	p.release = func() {
		signal.Stop(sigs)
		stopTimer()
	}
	go p.watch(sigs, timeUp)
	return p
}

func newStopper(hard func(cause error)) *stopper {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &stopper{ctx: ctx, cancel: cancel, grace: grace, hard: hard, out: os.Stderr,
		returned: make(chan struct{}), over: make(chan struct{}), release: func() {}}
}

// testsReturned says the tests are over: no grace period to enforce any
// more, teardown is under way.
func (p *stopper) testsReturned() { close(p.returned) }

// close ends the watch once teardown is done; signals get their default
// behaviour again.
func (p *stopper) close() {
	p.release()
	close(p.over)
}

// testsOver says whether the tests have returned. Asked at each event, not
// only learnt from the select below, which picks at random among the
// channels that are ready.
func (p *stopper) testsOver() bool {
	select {
	case <-p.returned:
		return true
	default:
		return false
	}
}

func (p *stopper) watch(sigs <-chan os.Signal, timeUp <-chan time.Time) {
	returned := p.returned
	var expired <-chan time.Time // the grace period, once the context is cancelled
	for {
		select {
		case <-p.over:
			return
		case <-returned:
			returned, expired = nil, nil
		case <-timeUp:
			timeUp = nil
			if p.ctx.Err() == nil && !p.testsOver() {
				p.cancel(errDeadline)
				fmt.Fprintf(p.out, "suite: %v: cancelling the tests' context; their cleanups run, then teardown (Ctrl-C to stop now)\n", errDeadline)
				expired = time.After(p.grace)
			}
		case sig := <-sigs:
			first, over := p.ctx.Err() == nil, p.testsOver()
			if first {
				p.cancel(fmt.Errorf("%w by %v", errInterrupted, sig))
			}
			switch {
			case first && !over:
				fmt.Fprintln(p.out, "suite: interrupted: cancelling the tests' context; their cleanups run, then teardown (Ctrl-C again to stop now)")
				expired = time.After(p.grace)
				continue
			case over:
				fmt.Fprintln(p.out, "suite: interrupted during teardown: it finishes, then exit")
			default:
				fmt.Fprintln(p.out, "suite: interrupted again: teardown now, without waiting for the tests, then exit")
			}
			p.hard(context.Cause(p.ctx))
			return
		case <-expired:
			if p.testsOver() {
				continue
			}
			fmt.Fprintf(p.out, "suite: the tests have not returned %s after their context was cancelled: teardown now, then exit\n", p.grace)
			p.hard(context.Cause(p.ctx))
			return
		}
	}
}
