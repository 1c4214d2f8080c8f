package wait

import (
	"context"
	"time"
)

// Sample calls fn at once and then every interval, for d: the last call
// is the first one made once d has passed since the start, so what
// happened at the end is seen too. It stops early when fn returns false,
// or when ctx ends - the sleep between two calls included - and then
// returns ctx's error. A sampling loop (a probe under a fault, a count
// every second) is not a wait for a condition: it runs its time out.
func Sample(ctx context.Context, d, interval time.Duration, fn func() bool) error {
	end := time.Now().Add(d)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if !fn() || !time.Now().Before(end) {
			return nil
		}
		t.Reset(interval)
	}
}
