package certification

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/source"
)

// What a run needs of this machine, from the README's measurements on the
// project's machines (2 cores, 24 GiB): a running cluster's node volumes
// take about 6 GB (four nodes and a joining fifth, every image preloaded
// in each); building one version takes about 4 GB of Go build cache, 2 GB
// of skewer's cache and 2 GB of images; a run's evidence about 100 MB; a
// surge run under traffic peaked at 3.8 GiB of host memory (issue 32's
// profile). Needs, not budgets: a machine short of them fails partway,
// after most of an hour.
const (
	gb               = uint64(1) << 30
	clusterDisk      = 6 * gb
	buildGoCache     = 4 * gb
	buildSkewerCache = 2 * gb
	buildImages      = 2 * gb
	evidenceDisk     = gb / 4
	runMemory        = 4 * gb
)

// PreflightChecks are the names of the preflight's checks, as
// --ignore-preflight-errors takes them (kubeadm's manner; "all" ignores
// every one).
var PreflightChecks = []string{"docker", "clusters", "containers", "root", "disk", "memory"}

// Machine is what the preflight reads of this machine.
type Machine struct {
	// Docker is nil when the engine answers.
	Docker error
	// Clusters are the kind clusters, Containers every container's name.
	Clusters, Containers []string
	// NeedsRoot says a build must run debootstrap as a user who is not
	// root; Root is then what `sudo -n true` answered (nil: root is had
	// without a prompt).
	NeedsRoot bool
	Root      error
	// Free is the space free on the filesystem of each path the run
	// writes (Docker's root, the Go build cache, skewer's cache, --out),
	// Device which filesystem it is: paths on one share its space.
	Free   map[string]uint64
	Device map[string]uint64
	// MemAvailable is the host's available memory (0: unknown).
	MemAvailable uint64
}

// Paths the run writes, named for the preflight's messages.
type Paths struct {
	DockerRoot, GoCache, Cache, Out string
}

// Preflight refuses, before anything is built or made, what would stop
// the run partway: no Docker engine, a cluster or container of a name a
// planned run makes (found at create time otherwise - the in-place run's
// after the whole surge run), a build that needs root where sudo would
// prompt, too little disk or memory for this plan. Checks named in ignore
// (or "all") report and do not refuse. It returns a line for each check
// that passed, was ignored or could not be asked, and an error that names
// every refusal.
func (in Input) Preflight(ctx context.Context, out string, ignore []string) ([]string, error) {
	m, p, builds := in.readMachine(ctx, out)
	return in.preflight(m, p, builds, ignore)
}

// readMachine reads this machine for the preflight; a part that cannot be
// read is left out, and its check says so where it matters.
func (in Input) readMachine(ctx context.Context, out string) (Machine, Paths, []version.Version) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var m Machine
	p := Paths{Cache: source.CacheDir(), Out: out}
	var builds []version.Version
	if m.Docker = docker.Ping(ctx); m.Docker == nil {
		if cs, err := cluster.List(cluster.Options{Out: io.Discard}); err == nil {
			for _, c := range cs {
				m.Clusters = append(m.Clusters, c.Name)
			}
		}
		m.Containers, _ = docker.Containers(ctx, "name="+in.Name)
		p.DockerRoot, _ = docker.RootDir(ctx)
		builds = in.Images.Builds(ctx, in.Pair.From, in.Pair.To)
		// Asked here, while ctx holds: the judging comes after it ends.
		if m.NeedsRoot = nodeimage.NeedsRoot(ctx, builds); m.NeedsRoot {
			if out, err := exec.CommandContext(ctx, "sudo", "-n", "true").CombinedOutput(); err != nil {
				m.Root = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
			}
		}
	}
	if len(builds) > 0 {
		if gc, err := exec.CommandContext(ctx, "go", "env", "GOCACHE").Output(); err == nil {
			p.GoCache = strings.TrimSpace(string(gc))
		}
	}
	m.Free, m.Device = map[string]uint64{}, map[string]uint64{}
	for _, path := range []string{p.DockerRoot, p.GoCache, p.Cache, p.Out} {
		if path == "" {
			continue
		}
		if free, dev, ok := freeSpace(path); ok {
			m.Free[path], m.Device[path] = free, dev
		}
	}
	m.MemAvailable = memAvailable()
	return m, p, builds
}

// freeSpace is the space free to an unprivileged writer on path's
// filesystem (its nearest existing folder: --out may not exist yet).
func freeSpace(path string) (free, device uint64, ok bool) {
	for dir := filepath.Clean(path); ; dir = filepath.Dir(dir) {
		var st syscall.Statfs_t
		var fi syscall.Stat_t
		if syscall.Statfs(dir, &st) == nil && syscall.Stat(dir, &fi) == nil {
			return st.Bavail * uint64(st.Bsize), uint64(fi.Dev), true
		}
		if dir == filepath.Dir(dir) {
			return 0, 0, false
		}
	}
}

// memAvailable is /proc/meminfo's MemAvailable in bytes, 0 if unread.
func memAvailable() uint64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// preflight judges a machine as read: one line per check, and the
// refusals of the checks not ignored.
func (in Input) preflight(m Machine, p Paths, builds []version.Version, ignore []string) ([]string, error) {
	var lines []string
	var errs []error
	runs := in.clusterRuns()
	check := func(name string, problems []string, ok string) {
		switch {
		case len(problems) == 0:
			lines = append(lines, fmt.Sprintf("[preflight] %s: %s", name, ok))
		case slices.Contains(ignore, name) || slices.Contains(ignore, "all"):
			for _, pr := range problems {
				lines = append(lines, fmt.Sprintf("[preflight] %s: ignored: %s", name, pr))
			}
		default:
			for _, pr := range problems {
				errs = append(errs, fmt.Errorf("[preflight] %s: %s (--ignore-preflight-errors=%s goes on regardless)", name, pr, name))
			}
		}
	}
	if m.Docker != nil {
		check("docker", []string{m.Docker.Error()}, "")
		lines = append(lines, "[preflight] clusters, containers, root: not checked: they are asked of Docker")
	} else {
		check("docker", nil, "the engine answers")
		clusters, containers, names := in.nameClashes(m, runs)
		check("clusters", clusters, "none named as the run's: "+strings.Join(names, ", "))
		check("containers", containers, "none named as the run's nodes")
	}
	if m.NeedsRoot {
		if m.Root != nil {
			check("root", []string{fmt.Sprintf("building %s makes Debian root filesystems with debootstrap, which needs root, and this user is not root and sudo -n asks for a password (%v): run as root, or give this user sudo without a password", versions(builds), m.Root)}, "")
		} else {
			check("root", nil, fmt.Sprintf("sudo -n works, for building %s", versions(builds)))
		}
	} else {
		check("root", nil, "not needed (nothing to build as root)")
	}
	problems, fit := diskProblems(m, p, builds, len(runs))
	check("disk", problems, fmt.Sprintf("%d run(s), their clusters one at a time, and %d node image(s) to build: %s", len(runs), len(builds), strings.Join(fit, "; ")))
	switch {
	case m.MemAvailable == 0:
		lines = append(lines, "[preflight] memory: not checked: /proc/meminfo not read")
	case m.MemAvailable < runMemory:
		check("memory", []string{fmt.Sprintf("%s of memory available, a run under traffic needs about %s", size(m.MemAvailable), size(runMemory))}, "")
	default:
		check("memory", nil, size(m.MemAvailable)+" available")
	}
	return lines, errors.Join(errs...)
}

// kindNode is the rest of a kind node container's name after its
// cluster's: its role and an index.
var kindNode = regexp.MustCompile(`^(control-plane|worker|external-load-balancer)[0-9]*$`)

// nameClashes are the clusters, and the containers that are not a kind
// cluster's, of a name the cluster or nodes of one of runs would take;
// and the names of the clusters the runs make.
func (in Input) nameClashes(m Machine, runs []rollout.Strategy) (clusters, containers, names []string) {
	for _, s := range runs {
		name := in.Name + "-" + string(s)
		names = append(names, name)
		if slices.Contains(m.Clusters, name) {
			clusters = append(clusters, fmt.Sprintf("a cluster named %s exists, and the %s run makes one of that name (delete it: skewer down --name %s; or give --name)", name, s, name))
			continue
		}
		for _, c := range m.Containers {
			if rest, ok := strings.CutPrefix(c, name+"-"); ok && kindNode.MatchString(rest) {
				containers = append(containers, fmt.Sprintf("a container named %s is here, not a node of a kind cluster: the %s run's cluster %s names a node so (docker rm -f %s; or give --name)", c, s, name, c))
			}
		}
	}
	return clusters, containers, names
}

// diskProblems adds up what the run writes where, by filesystem, against
// what is free there: the filesystems short of it, and each one's figures.
// A path not read (Docker's root on another machine) is not judged.
func diskProblems(m Machine, p Paths, builds []version.Version, runs int) (problems, fit []string) {
	need := map[string]uint64{}
	if runs > 0 {
		need[p.DockerRoot] += clusterDisk // the runs make their clusters one at a time
		need[p.Out] += uint64(runs) * evidenceDisk
	}
	n := uint64(len(builds))
	need[p.DockerRoot] += n * buildImages
	need[p.GoCache] += n * buildGoCache
	need[p.Cache] += n * buildSkewerCache
	type fs struct {
		need, free uint64
		paths      []string
	}
	byDev := map[uint64]*fs{}
	var devs []uint64
	for _, path := range []string{p.DockerRoot, p.GoCache, p.Cache, p.Out} {
		free, ok := m.Free[path]
		if path == "" || !ok || need[path] == 0 {
			continue
		}
		d := m.Device[path]
		if byDev[d] == nil {
			byDev[d] = &fs{free: free}
			devs = append(devs, d)
		}
		if !slices.Contains(byDev[d].paths, path) {
			byDev[d].need += need[path]
			byDev[d].paths = append(byDev[d].paths, path)
		}
	}
	for _, d := range devs {
		f := byDev[d]
		fit = append(fit, fmt.Sprintf("%s free on the filesystem of %s, about %s needed", size(f.free), strings.Join(f.paths, ", "), size(f.need)))
		if f.free < f.need {
			problems = append(problems, fmt.Sprintf("%s free on the filesystem of %s, the run needs about %s there (a cluster's node volumes 6 GB; per version built 4 GB of Go build cache, 2 GB of skewer's cache, 2 GB of images): free some (skewer images clean, docker system prune) or build elsewhere",
				size(f.free), strings.Join(f.paths, ", "), size(f.need)))
		}
	}
	return problems, fit
}

func size(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/float64(gb)) }

func versions(vs []version.Version) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.String())
	}
	return strings.Join(s, " and ")
}
