package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A sample runs its time out, one call every interval and a last one once
// the time has passed; a cancel ends it at once, mid-sleep.
func TestSample(t *testing.T) {
	n := 0
	start := time.Now()
	if err := Sample(context.Background(), 100*time.Millisecond, 20*time.Millisecond, func() bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); n < 5 || n > 7 || took < 100*time.Millisecond {
		t.Errorf("%d calls in %s for 100ms every 20ms: want 6, the last past the end", n, took)
	}
	n = 0
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
