package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skewer-k8s/skewer/internal/run"
)

// cgroupRoot is where the host mounts its cgroups.
const cgroupRoot = "/sys/fs/cgroup"

// Resident is the memory the containers filter picks hold now, summed, as
// the engine's own `docker stats` counts a container's: its cgroup's usage
// less the page cache it can drop (inactive file pages). A kind node's
// cgroup holds its Pods' too. It reads the cgroups the host mounts, one
// file or two a container: cheap enough to sample every few seconds, where
// `docker stats --no-stream` waits a second for each answer.
func Resident(ctx context.Context, filter string) (int64, error) {
	out, err := run.Command("docker", "ps", "-q", "--no-trunc", "--filter", filter).String(ctx)
	if err != nil || out == "" {
		return 0, err
	}
	// A container removed since it was listed holds nothing: only when
	// none could be read is it an error (a layout not known here).
	var sum int64
	var errs []error
	ids := strings.Fields(out)
	for _, id := range ids {
		n, err := resident(cgroupRoot, id)
		if err != nil {
			errs = append(errs, err)
		}
		sum += n
	}
	if len(errs) == len(ids) {
		return 0, errors.Join(errs...)
	}
	return sum, nil
}

// ResidentPeak is the largest of the samples WatchResident took.
type ResidentPeak struct {
	// Bytes is the largest sample: the containers and the extra together.
	Bytes int64
	// Containers is the containers' share of it.
	Containers int64
	At         time.Time
	Samples    int
	// Unread is why the last sample that could not be read was not.
	Unread error
}

// WatchResident samples Resident(filter), and extra() beside it when
// given, every every and once more when the returned function is called,
// which ends the sampling and returns the peak.
func WatchResident(ctx context.Context, filter string, every time.Duration, extra func() int64) func() ResidentPeak {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var p ResidentPeak
	sample := func(ctx context.Context) {
		n, err := Resident(ctx, filter)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if ctx.Err() == nil { // a sample cut short by the stop is none
				p.Unread = err
			}
			return
		}
		var more int64
		if extra != nil {
			more = extra()
		}
		p.Samples++
		if n+more > p.Bytes {
			p.Bytes, p.Containers, p.At = n+more, n, time.Now()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			sample(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() ResidentPeak {
		cancel()
		<-done
		sample(context.WithoutCancel(ctx))
		mu.Lock()
		defer mu.Unlock()
		return p
	}
}

// cgroupLayout is where one cgroup layout keeps a container's memory
// figures: the directory under the root, the file of its usage and the
// field of memory.stat that counts its inactive file pages.
type cgroupLayout struct{ dir, usage, inactive string }

// layouts are the cgroup layouts a Docker engine uses: v1 or v2, with the
// cgroupfs driver or systemd's.
var layouts = []cgroupLayout{
	{"memory/docker/%s", "memory.usage_in_bytes", "total_inactive_file"},
	{"memory/system.slice/docker-%s.scope", "memory.usage_in_bytes", "total_inactive_file"},
	{"system.slice/docker-%s.scope", "memory.current", "inactive_file"},
	{"docker/%s", "memory.current", "inactive_file"},
}

// resident is one container's resident memory under root.
func resident(root, id string) (int64, error) {
	for _, l := range layouts {
		dir := filepath.Join(root, fmt.Sprintf(l.dir, id))
		raw, err := os.ReadFile(filepath.Join(dir, l.usage))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		usage, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(dir, l.usage), err)
		}
		inactive, err := statField(filepath.Join(dir, "memory.stat"), l.inactive)
		if err != nil {
			return 0, err
		}
		return max(usage-inactive, 0), nil
	}
	return 0, fmt.Errorf("container %.12s: no memory cgroup under %s in any layout the engine uses", id, root)
}

// statField is the value of field in a memory.stat file.
func statField(path, field string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && name == field {
			return strconv.ParseInt(value, 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no %s", path, field)
}
