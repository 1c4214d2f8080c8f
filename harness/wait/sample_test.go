package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A sample runs its time out, its calls at least an interval apart, the
// last one the first past the end; a cancel ends it at once, mid-sleep.
// What a loaded machine changes (a timer firing late, fewer calls) is not
// what is asserted.
func TestSample(t *testing.T) {
	var calls []time.Time
	start := time.Now()
	if err := Sample(context.Background(), 100*time.Millisecond, 20*time.Millisecond, func() bool { calls = append(calls, time.Now()); return true }); err != nil {
		t.Fatal(err)
	}
	end := start.Add(100 * time.Millisecond)
	if len(calls) < 2 || len(calls) > 6 || calls[len(calls)-1].Before(end.Add(-time.Millisecond)) || !calls[len(calls)-2].Before(end) {
		t.Errorf("%d calls for 100ms every 20ms, at %v after the start: want at most 6, every one but the last before the end", len(calls), since(start, calls))
	}
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].Sub(calls[i-1]); gap < 20*time.Millisecond {
			t.Errorf("calls %d and %d %s apart, less than the interval", i-1, i, gap)
		}
	}
	n := 0
	if err := Sample(context.Background(), time.Second, 10*time.Millisecond, func() bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Errorf("fn said stop at its third call: %d calls, %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	err := Sample(ctx, time.Minute, 10*time.Second, func() bool { return true })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("a cancel mid-sleep: %v after %s", err, time.Since(start))
	}
}

// since are the times ts after start.
func since(start time.Time, ts []time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(start).Round(time.Millisecond))
	}
	return out
}
