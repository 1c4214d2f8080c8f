package wait

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var tiny = Budget{Timeout: 50 * time.Millisecond, Interval: 5 * time.Millisecond}

// The acceptance criterion: a timeout names what it waited for
// and what it last saw.
func TestTimeoutSaysWhatAndLastSeen(t *testing.T) {
	// A budget a loaded machine still polls more than once in.
	budget := Budget{Timeout: time.Second, Interval: time.Millisecond}
	n := 0
	err := Within(context.Background(), budget, "deploy/web rolled out", func(context.Context) (bool, string, error) {
		n++
		if n == 1 {
			return false, "0 updated, 0 available of 3", nil
		}
		return false, "2 updated, 1 available of 3", nil
	})
	want := "timed out after 1s waiting for deploy/web rolled out: last seen: 2 updated, 1 available of 3"
	if err == nil || err.Error() != want {
		t.Fatalf("Within = %v, want %q", err, want)
	}
	if n < 2 {
		t.Errorf("the condition was looked at %d time(s), want it polled", n)
	}
}

func TestTimeoutWithNothingObserved(t *testing.T) {
	err := Within(context.Background(), tiny, "x", func(context.Context) (bool, string, error) {
		return false, "", nil
	})
	if err == nil || !strings.HasSuffix(err.Error(), "last seen: nothing observed") {
		t.Fatalf("Within = %v, want it to say nothing was observed", err)
	}
}

func TestDoneAtFirstTryDoesNotWait(t *testing.T) {
	start := time.Now()
	err := Within(context.Background(), Budget{Timeout: time.Minute, Interval: time.Minute}, "x",
		func(context.Context) (bool, string, error) { return true, "", nil })
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %s for a condition already met", took)
	}
}

func TestConditionErrorEndsTheWaitAtOnce(t *testing.T) {
	boom := errors.New("the apiserver exited at start")
	n := 0
	err := Within(context.Background(), Budget{Timeout: time.Minute, Interval: time.Millisecond}, "the apiserver restarted",
		func(context.Context) (bool, string, error) {
			n++
			return false, "", boom
		})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "the apiserver restarted") {
		t.Fatalf("Within = %v, want %v wrapped with what was awaited", err, boom)
	}
	if n != 1 {
		t.Errorf("the condition was looked at %d times after an error, want 1", n)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := Within(ctx, Budget{Timeout: time.Minute, Interval: time.Millisecond}, "node Ready",
		func(context.Context) (bool, string, error) {
			cancel()
			return false, "Ready=False", nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Within = %v, want it to wrap context.Canceled", err)
	}
	for _, part := range []string{"node Ready", "last seen: Ready=False"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("Within = %q, want it to say %q", err, part)
		}
	}
	if strings.Contains(err.Error(), "timed out") {
		t.Errorf("Within = %q: a cancellation is not the budget running out", err)
	}
}

// A call the budget cuts short ends the wait as a timeout, not as the
// condition's error.
func TestCallCutByTheBudgetIsATimeout(t *testing.T) {
	err := Within(context.Background(), tiny, "x", func(ctx context.Context) (bool, string, error) {
		<-ctx.Done()
		return false, "", ctx.Err()
	})
	if err == nil || !strings.HasPrefix(err.Error(), "timed out after 50ms waiting for x") {
		t.Fatalf("Within = %v, want a timeout", err)
	}
}

func TestInvalidBudgetsAreRefused(t *testing.T) {
	for _, b := range []Budget{
		{},
		{Timeout: -time.Second, Interval: time.Millisecond},
		{Timeout: time.Second},
		{Timeout: time.Second, Interval: -time.Millisecond},
		{Timeout: time.Second, Interval: 2 * time.Second},
	} {
		if b.Validate() == nil {
			t.Errorf("%+v.Validate() = nil, want an error", b)
		}
		called := false
		err := Within(context.Background(), b, "x", func(context.Context) (bool, string, error) {
			called = true
			return true, "", nil
		})
		if err == nil || called {
			t.Errorf("Within(%+v) = %v (condition called: %v), want an error before any look", b, err, called)
		}
	}
	if err := tiny.Validate(); err != nil {
		t.Errorf("%+v.Validate() = %v", tiny, err)
	}
}

func TestUnknownNameIsAnError(t *testing.T) {
	if _, err := Named("rollout/typo"); err == nil || !strings.Contains(err.Error(), `no timeout named "rollout/typo" (known: `) {
		t.Fatalf("Named = %v, want an error listing the known names", err)
	}
	err := For(context.Background(), "rollout/typo", "x", func(context.Context) (bool, string, error) {
		return true, "", nil
	})
	if err == nil {
		t.Fatal("For with an unknown name = nil, want an error")
	}
}

func TestTable(t *testing.T) {
	want := map[string]Budget{
		"cluster/node-systemd":        {3 * time.Minute, 500 * time.Millisecond},
		"rollout/drain":               {3 * time.Minute, time.Second},
		"rollout/control-plane-ready": {4 * time.Minute, 500 * time.Millisecond},
		"rollout/apiserver-version":   {30 * time.Second, time.Second},
		"faults/apiserver-restart":    {3 * time.Minute, time.Second},
		"traffic/watch-catch-up":      {15 * time.Second, 500 * time.Millisecond},
	}
	for name, b := range want {
		got, err := Named(name)
		if err != nil || got != b {
			t.Errorf("Named(%q) = %+v, %v, want %+v", name, got, err, b)
		}
	}
	names := Names()
	for i, name := range names {
		b, _ := Named(name)
		if err := b.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if i > 0 && names[i-1] >= name {
			t.Errorf("Names() not sorted: %v", names)
		}
	}
}

// A call refused because the deadline is near - client-go's rate limiter
// says "would exceed context deadline" while the context is still live -
// ends the wait as a timeout too; the same error earlier in the budget
// is the condition's error.
func TestCallRefusedNearTheDeadlineIsATimeout(t *testing.T) {
	limiter := func(ctx context.Context) (bool, string, error) {
		if dl, _ := ctx.Deadline(); time.Until(dl) < 100*time.Millisecond {
			return false, "", errors.New("rate: Wait(n=1) would exceed context deadline")
		}
		return false, "Pending", nil
	}
	err := Within(context.Background(), Budget{Timeout: 250 * time.Millisecond, Interval: 100 * time.Millisecond}, "x", limiter)
	if err == nil || !strings.HasPrefix(err.Error(), "timed out after 250ms waiting for x: last seen: Pending") {
		t.Fatalf("Within = %v, want a timeout", err)
	}
	err = Within(context.Background(), Budget{Timeout: 250 * time.Millisecond, Interval: 10 * time.Millisecond}, "x",
		func(context.Context) (bool, string, error) { return false, "", errors.New("forbidden") })
	if err == nil || !strings.Contains(err.Error(), "failed to wait for x: forbidden") {
		t.Fatalf("Within = %v, want the condition's error", err)
	}
}

// A condition that reports a failed read as its state: the last look, cut
// short by the budget, sees only the client's refusal; the timeout still
// says what the look before it saw.
func TestLastLookCutShortKeepsTheStateBeforeIt(t *testing.T) {
	cond := func(ctx context.Context) (bool, string, error) {
		if dl, _ := ctx.Deadline(); time.Until(dl) < 100*time.Millisecond {
			return false, "client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline", nil
		}
		return false, "phase Running, restarts=2", nil
	}
	err := Within(context.Background(), Budget{Timeout: 250 * time.Millisecond, Interval: 100 * time.Millisecond}, "x", cond)
	want := "last seen: phase Running, restarts=2; then: client rate limiter Wait returned an error"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Within = %v, want it to contain %q", err, want)
	}
}
