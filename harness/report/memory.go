package report

import (
	"fmt"
	"time"
)

// Memory is the most memory a run held at once, sampled: its cluster's
// containers (each node with its Pods, as `docker stats` counts them) and
// skewer itself.
type Memory struct {
	// PeakBytes is the largest sample: the containers and skewer together.
	PeakBytes int64     `json:"peakBytes"`
	At        time.Time `json:"at"`
	// ClusterBytes is the containers' share of that sample.
	ClusterBytes int64 `json:"clusterBytes"`
	// SkewerPeakBytes is skewer's own high-water mark over the whole run
	// (VmHWM): it may fall outside the peak sample.
	SkewerPeakBytes int64         `json:"skewerPeakBytes"`
	Samples         int           `json:"samples"`
	Every           time.Duration `json:"every"`
	// Unread is why samples could not be read, if some could not.
	Unread string `json:"unread,omitempty"`
}

func (m Memory) String() string {
	gib := func(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
	s := fmt.Sprintf("peak memory %s at %s (the cluster's containers %s), skewer's own peak %s; %d samples, every %s",
		gib(m.PeakBytes), m.At.UTC().Format(time.TimeOnly), gib(m.ClusterBytes), gib(m.SkewerPeakBytes), m.Samples, m.Every)
	if m.Unread != "" {
		s += "; unread: " + m.Unread
	}
	return s
}
