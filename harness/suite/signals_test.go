package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestBudgetStopsShortOfGoTestTimeout(t *testing.T) {
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{0, 0},                              // no -timeout: no deadline
		{10 * time.Minute, 5 * time.Minute}, // go test's default: 5 minutes short, exactly half
		{4 * time.Minute, 2 * time.Minute},  // 5 minutes short would be below half
		{30 * time.Minute, 25 * time.Minute},
		{60 * time.Minute, 54 * time.Minute}, // make e2e: 10% is more than 5 minutes
		{90 * time.Minute, 81 * time.Minute},
	} {
		if got := budget(tc.timeout); got != tc.want {
			t.Errorf("budget(%s) = %s, want %s", tc.timeout, got, tc.want)
		}
	}
}

func TestExitCodeSaysWhyTheRunStopped(t *testing.T) {
	for _, tc := range []struct {
		code  int
		cause error
		want  int
	}{
		{0, nil, 0},
		{1, nil, 1},
		{0, fmt.Errorf("%w by interrupt", errInterrupted), 130},
		{1, fmt.Errorf("%w by terminated", errInterrupted), 130},
		{0, errDeadline, 1},
		{1, errDeadline, 1},
	} {
		if got := exitCode(tc.code, tc.cause); got != tc.want {
			t.Errorf("exitCode(%d, %v) = %d, want %d", tc.code, tc.cause, got, tc.want)
		}
	}
}

// watched starts a stopper on fake signals and a fake deadline; the
// channel it returns receives the cause of each hard exit.
func watched(t *testing.T, grace time.Duration) (*stopper, chan<- os.Signal, chan<- time.Time, <-chan error) {
	t.Helper()
	hard := make(chan error, 1)
	p := newStopper(func(cause error) { hard <- cause })
	p.grace, p.out = grace, io.Discard
	sigs, timeUp := make(chan os.Signal, 2), make(chan time.Time, 1)
	go p.watch(sigs, timeUp)
	t.Cleanup(p.close)
	return p, sigs, timeUp, hard
}

func cancelled(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("the tests' context was not cancelled")
		return nil
	}
}

func hardExit(t *testing.T, hard <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case cause := <-hard:
		return cause
	case <-time.After(within):
		return nil
	}
}

func TestFirstSignalCancelsTheTestsSecondExits(t *testing.T) {
	p, sigs, _, hard := watched(t, time.Hour)
	sigs <- os.Interrupt
	if cause := cancelled(t, p.ctx); !errors.Is(cause, errInterrupted) {
		t.Fatalf("cause %v, want %v", cause, errInterrupted)
	}
	if cause := hardExit(t, hard, 50*time.Millisecond); cause != nil {
		t.Fatalf("hard exit after one signal (%v): the tests' cleanups had no chance", cause)
	}
	sigs <- syscall.SIGTERM
	if cause := hardExit(t, hard, 5*time.Second); !errors.Is(cause, errInterrupted) {
		t.Fatalf("second signal: hard exit with %v, want %v", cause, errInterrupted)
	}
}

func TestDeadlineCancelsThenGraceRunsOut(t *testing.T) {
	p, _, timeUp, hard := watched(t, 20*time.Millisecond)
	timeUp <- time.Now()
	if cause := cancelled(t, p.ctx); cause != errDeadline {
		t.Fatalf("cause %v, want %v", cause, errDeadline)
	}
	if cause := hardExit(t, hard, 5*time.Second); cause != errDeadline {
		t.Fatalf("tests still running after the grace period: hard exit with %v, want %v", cause, errDeadline)
	}
}

func TestTestsReturningInTimeMeansNoHardExit(t *testing.T) {
	p, sigs, _, hard := watched(t, 50*time.Millisecond)
	sigs <- os.Interrupt
	cancelled(t, p.ctx)
	p.testsReturned()
	if cause := hardExit(t, hard, 200*time.Millisecond); cause != nil {
		t.Fatalf("hard exit (%v) though the tests returned within the grace period", cause)
	}
}

func TestDeadlineAfterTheTestsIsIgnored(t *testing.T) {
	p, _, timeUp, hard := watched(t, time.Millisecond)
	p.testsReturned()
	timeUp <- time.Now()
	if cause := hardExit(t, hard, 100*time.Millisecond); cause != nil || p.ctx.Err() != nil {
		t.Fatalf("deadline during teardown: hard exit %v, context %v", cause, p.ctx.Err())
	}
}

func TestSignalDuringTeardownExitsAfterIt(t *testing.T) {
	p, sigs, _, hard := watched(t, time.Hour)
	p.testsReturned()
	sigs <- os.Interrupt
	if cause := hardExit(t, hard, 5*time.Second); !errors.Is(cause, errInterrupted) {
		t.Fatalf("hard exit with %v, want %v", cause, errInterrupted)
	}
}
