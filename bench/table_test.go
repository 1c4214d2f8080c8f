package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"
)

// A figure is one measurement of this run: skewer's time for a piece of
// work beside the plain tool doing the same work in the same run (its
// anchor, when there is one) and the target the speed issue sets for it -
// a ratio to the anchor, or a time on this machine.
type figure struct {
	what string
	took time.Duration
	// anchor names the plain tool's run of the same work; anchorTook its time.
	anchor     string
	anchorTook time.Duration
	// maxRatio is the target as a ratio to the anchor; limit as a time.
	maxRatio float64
	limit    time.Duration
	// note is what else a reader needs: the CPU share, what it waits on.
	note string
}

// The figures every benchmark of this run measured, printed by TestMain
// after the last one as one table: a figure from one run, compared with
// its anchor from the same run, never with a figure of another day.
var (
	figuresMu sync.Mutex
	figures   []figure
)

// The anchors other figures name, each measured by a benchmark of this
// run: the plain tool's time for the same work.
const (
	anchorCreate  = "kind create cluster"
	anchorDelete  = "kind delete cluster"
	anchorReplace = "bare kubeadm replacement"
)

var anchors = map[string]time.Duration{}

func setAnchor(name string, d time.Duration) {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	anchors[name] = d
}

func record(f figure) {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	figures = append(figures, f)
}

// The targets of the speed issue (#32), as the table states them.
const (
	maxAnchorRatio   = 1.3 // a phase against the plain operation it wraps
	certifyLimit     = 15 * time.Minute
	firstImageLimit  = 8 * time.Minute // a node image cold, the first version
	secondImageLimit = 6 * time.Minute // the next, reusing what the first built
)

func TestMain(m *testing.M) {
	code := m.Run()
	if len(figures) > 0 {
		printFigures(os.Stdout, figures, anchors)
	}
	os.Exit(code)
}

// printFigures writes the table: each figure, its anchor, the ratio and
// whether the target is met. A figure's anchor measured by another
// benchmark is taken from anchors; one whose benchmark did not run (BENCH
// chose others) shows as not measured.
func printFigures(w io.Writer, fs []figure, anchors map[string]time.Duration) {
	fmt.Fprintln(w, "\nmake bench, one run on this machine: each figure beside its anchor (the plain tool, same run) and its target")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tskewer\tanchor\tratio\ttarget\t\tnote")
	for _, f := range fs {
		anchor, ratio, target, met := "-", "-", "-", ""
		if f.anchorTook == 0 {
			f.anchorTook = anchors[f.anchor]
		}
		switch {
		case f.anchor != "" && f.anchorTook > 0:
			anchor = fmt.Sprintf("%s %s", f.anchor, round(f.anchorTook))
		case f.anchor != "":
			anchor = f.anchor + " (not measured in this run)"
		}
		if f.anchorTook > 0 {
			r := f.took.Seconds() / f.anchorTook.Seconds()
			ratio = fmt.Sprintf("%.2fx", r)
			if f.maxRatio > 0 {
				target, met = fmt.Sprintf("<= %.2fx", f.maxRatio), verdict(r <= f.maxRatio)
			}
		}
		if f.limit > 0 {
			target, met = "<= "+round(f.limit), verdict(f.took <= f.limit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.what, round(f.took), anchor, ratio, target, met, f.note)
	}
	tw.Flush()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

func round(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// cpuSample is the machine's CPU counters at one moment (/proc/stat's
// first line, in clock ticks): what every core did since boot.
type cpuSample struct {
	at          time.Time
	busy, total uint64
}

// parseCPU reads /proc/stat's aggregate line: user nice system idle iowait
// irq softirq steal (guest time is inside user already). Idle and iowait
// are the cores waiting; the rest kept them busy.
func parseCPU(r io.Reader) (busy, total uint64, err error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return 0, 0, err
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("not /proc/stat's cpu line: %q", line)
	}
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat field %d: %w", i+1, err)
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}

// sampleCPU reads the machine's CPU counters every second until the
// returned function is called, which returns the samples.
func sampleCPU() (stop func() []cpuSample) {
	var mu sync.Mutex
	var samples []cpuSample
	done, finished := make(chan struct{}), make(chan struct{})
	take := func() {
		f, err := os.Open("/proc/stat")
		if err != nil {
			return
		}
		defer f.Close()
		if busy, total, err := parseCPU(f); err == nil {
			mu.Lock()
			samples = append(samples, cpuSample{time.Now(), busy, total})
			mu.Unlock()
		}
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			take()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() []cpuSample {
		close(done)
		<-finished
		take()
		mu.Lock()
		defer mu.Unlock()
		return samples
	}
}

// busyShare is the share of the machine's cores kept busy between from and
// to, from the samples nearest inside them; false when fewer than two
// samples fall inside (a span shorter than the sampling).
func busyShare(samples []cpuSample, from, to time.Time) (float64, bool) {
	var first, last *cpuSample
	for i := range samples {
		s := &samples[i]
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		if first == nil {
			first = s
		}
		last = s
	}
	if first == nil || last == first || last.total == first.total {
		return 0, false
	}
	return float64(last.busy-first.busy) / float64(last.total-first.total), true
}

// waitsOn says what a span of the run spent its time on, by the share of
// the cores it kept busy: above 85% the CPU bounds it (less work makes it
// shorter, not less waiting); below, part of it waited with cores idle - on
// an apiserver's restart, a timeout, a poll - which only a shorter wait
// makes shorter.
func waitsOn(share float64, ok bool) string {
	switch {
	case !ok:
		return "too short to sample"
	case share >= 0.85:
		return fmt.Sprintf("CPU %.0f%% busy: bound by the CPU", 100*share)
	default:
		return fmt.Sprintf("CPU %.0f%% busy: waits with cores idle (restarts, timeouts, polls)", 100*share)
	}
}
