package certification

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// slowLink judges proxy.fault.slow-link and says what the write between the
// timeouts made.
func (l *linkRun) slowLink(ctx context.Context) (promise.Verdict, written) {
	const id = "proxy.fault.slow-link"
	slow := func(d time.Duration) *faults.SlowLink { return &faults.SlowLink{From: l.old, To: l.peer, Delay: d} }
	var seen slowSeen

	// Below: +100 ms each way, five reads, each at least a round trip slower.
	api, err := l.api(30 * time.Second)
	if err != nil {
		return fail(id, "%v", err), uncounted(err)
	}
	var below []Attempt
	f := slow(100 * time.Millisecond)
	if err := l.with(ctx, f, func() error {
		start := time.Now()
		for range 5 {
			below = append(below, Try(start, func() error { _, err := api.List(ctx, metav1.ListOptions{Limit: 1}); return err }))
		}
		return nil
	}); err != nil {
		return fail(id, "%v", err), uncounted(err)
	}
	seen.below, seen.belowFault = below, f.Name()

	// Between: +3 s each way. The TLS handshake takes 6 s, the create
	// reaches the peer at ~9 s, its answer would be back at ~12 s; the
	// client gives up at 10.5 s.
	made := noWrite
	if l.obj != nil {
		wapi, err := l.api(10500 * time.Millisecond)
		if err != nil {
			return fail(id, "%v", err), uncounted(err)
		}
		f = slow(3 * time.Second)
		if err := l.with(ctx, f, func() error {
			a, _ := l.write(ctx, wapi, time.Now())
			seen.between, seen.betweenFault = &a, f.Name()
			made = l.mostMade(ctx, "the create given up at +3 s each way", 8*time.Second)
			return nil
		}); err != nil {
			return fail(id, "%v", err), uncounted(err)
		}
	}

	// Above: +6 s each way; the handshake (12 s) outlasts its 10 s timeout.
	api, err = l.api(35 * time.Second)
	if err != nil {
		return fail(id, "%v", err), made
	}
	f = slow(6 * time.Second)
	var above Attempt
	if err := l.with(ctx, f, func() error {
		above = Try(time.Now(), func() error { _, err := api.List(ctx, metav1.ListOptions{Limit: 1}); return err })
		return nil
	}); err != nil {
		return fail(id, "%v", err), made
	}
	seen.above, seen.aboveFault = above, f.Name()
	return slowVerdict(l.w.Old[0].Name, seen), made
}

// slowSeen is what the slow-link check saw through the entry, with each
// fault's name: the reads below the timeouts, the create between them
// (nil without a sample object), the read above them.
type slowSeen struct {
	below                                []Attempt
	between                              *Attempt
	above                                Attempt
	belowFault, betweenFault, aboveFault string
}

// slowVerdict judges proxy.fault.slow-link on what was seen through entry.
func slowVerdict(entry string, seen slowSeen) promise.Verdict {
	const id = "proxy.fault.slow-link"
	var bad, ev, took []string
	for _, a := range seen.below {
		took = append(took, a.Took.Round(10*time.Millisecond).String())
		if a.Code != 200 || a.Took < 200*time.Millisecond {
			bad = append(bad, fmt.Sprintf("%s: want 200 in at least a round trip (200ms): %s", seen.belowFault, a))
		}
	}
	ev = append(ev, fmt.Sprintf("%s: 5 lists through %s: %v in %s", seen.belowFault, entry, Codes(seen.below), strings.Join(took, ", ")))
	if a := seen.between; a != nil {
		ev = append(ev, fmt.Sprintf("%s: create through %s with a 10.5 s client timeout: %s", seen.betweenFault, entry, *a))
		if a.Code == 404 {
			bad = append(bad, fmt.Sprintf("%s: create answered 404: %s", seen.betweenFault, *a))
		}
	}
	ev = append(ev, fmt.Sprintf("%s: list through %s: %s", seen.aboveFault, entry, seen.above))
	if seen.above.Code != 503 || seen.above.Took >= slowAboveBound {
		bad = append(bad, fmt.Sprintf("%s: want an explicit 503 within %s (past the TLS handshake timeout): %s", seen.aboveFault, slowAboveBound, seen.above))
	}
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: strings.Join(bad, "; ")}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}
