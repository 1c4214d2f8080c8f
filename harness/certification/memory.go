package certification

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// memoryEvery is how often a run's memory is sampled: a phase's swing
// (an apiserver started, a node image's images imported) lasts seconds
// and a sample costs one `docker ps` and a file or two a container.
const memoryEvery = 5 * time.Second

// sampleMemory samples, every memoryEvery until the returned function is
// called, what the run holds: its cluster's containers (docker.Resident)
// and skewer's own resident set. The function returns the peak.
func (r *run) sampleMemory(ctx context.Context) func() *report.Memory {
	stop := docker.WatchResident(ctx, "label=io.x-k8s.kind.cluster="+r.c.Name, memoryEvery, func() int64 {
		rss, _ := selfMemory()
		return rss
	})
	return func() *report.Memory {
		p := stop()
		_, own := selfMemory()
		m := &report.Memory{PeakBytes: p.Bytes, At: p.At, ClusterBytes: p.Containers, SkewerPeakBytes: own, Samples: p.Samples, Every: memoryEvery}
		if p.Unread != nil {
			m.Unread = p.Unread.Error()
		}
		return m
	}
}

// selfMemory is skewer's own resident set now and its high-water mark,
// in bytes (0 where /proc says nothing).
func selfMemory() (rss, peak int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), ":")
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak
}
