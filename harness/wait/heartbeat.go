package wait

import "time"

// Heartbeat calls beat with the time since it began, every interval,
// until the returned stop is called; stop returns once beat will not be
// called again. Something that runs minutes says so while it runs: a log
// that shows nothing that long reads as a hang.
func Heartbeat(every time.Duration, beat func(elapsed time.Duration)) (stop func()) {
	start := time.Now()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				beat(time.Since(start))
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
