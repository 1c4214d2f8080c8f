package nodeimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/run"
)

// isSourceTree says whether dir is the root of a k8s.io/kubernetes tree.
func isSourceTree(dir string) bool {
	raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == "k8s.io/kubernetes"
		}
	}
	return false
}

// openTree reads what a source tree is - its commit, whether it has
// changes, the version git describe gives it - without building it.
func openTree(ctx context.Context, r *Release) (*Release, error) {
	r.tree = r.Path
	git := func(args ...string) (string, error) {
		return run.Command(append([]string{"git", "-C", r.tree}, args...)...).String(ctx)
	}
	var err error
	if r.Commit, err = git("rev-parse", "HEAD^{commit}"); err != nil {
		return nil, fmt.Errorf("source tree %s: its version is read from git, as hack/lib/version.sh reads it, and it is no git checkout with a commit: %w", r.Path, err)
	}
	r.Commit = strings.TrimSpace(r.Commit)
	status, err := git("status", "--porcelain")
	if err != nil {
		return nil, fmt.Errorf("source tree %s: %w", r.Path, err)
	}
	r.Dirty = strings.TrimSpace(status) != ""
	described, err := git("describe", "--tags", "--match=v*", "--abbrev=14", r.Commit)
	if err != nil {
		return nil, fmt.Errorf("source tree %s: no tag v* before %s says its version (git describe): %w", r.Path, r.Commit, err)
	}
	if r.Version, err = treeVersion(strings.TrimSpace(described), r.Dirty); err != nil {
		return nil, fmt.Errorf("source tree %s: %w", r.Path, err)
	}
	// What the tree is: its commit, and its changes when it has any.
	h := sha256.New()
	fmt.Fprintf(h, "commit %s\n", r.Commit)
	if r.Dirty {
		diff, err := run.Command("git", "-C", r.tree, "diff", "HEAD", "--binary").Output(ctx)
		if err != nil {
			return nil, fmt.Errorf("source tree %s: %w", r.Path, err)
		}
		h.Write(diff)
		h.Write([]byte(status)) // untracked files by name
	}
	r.key = hex.EncodeToString(h.Sum(nil))[:16]
	return r, nil
}

var (
	distanceToSubversion = regexp.MustCompile(`-([0-9]+)-g([0-9a-f]{14})$`)
	distanceToTag        = regexp.MustCompile(`-g([0-9a-f]{14})$`)
)

// treeVersion turns git describe's answer into the version Kubernetes'
// own build gives it (hack/lib/version.sh): v1.36.3-acme.2-4-gCOMMIT
// becomes v1.36.3-acme.2.4+COMMIT, v1.36.3-4-gCOMMIT v1.36.3-4+COMMIT, and
// a tree with changes ends in -dirty.
func treeVersion(described string, dirty bool) (version.Version, error) {
	v := described
	switch strings.Count(v, "-") {
	case 3:
		v = distanceToSubversion.ReplaceAllString(v, ".$1+$2")
	case 2:
		v = distanceToTag.ReplaceAllString(v, "+$1")
	}
	if dirty {
		v += "-dirty"
	}
	parsed, err := version.Parse(v)
	if err != nil {
		return version.Version{}, fmt.Errorf("git describe says %q, which is no Kubernetes version", described)
	}
	return parsed, nil
}

// build compiles the tree's binaries into out with its own Go toolchain
// settings (its go.work and vendor/ are used as they are), reporting the
// tree's version, commit and state. A build that fails keeps its output
// beside the cache and names it.
func (r *Release) build(ctx context.Context, out, logDir string) error {
	date, err := run.Command("git", "-C", r.tree, "log", "-1", "--format=%cI", r.Commit).String(ctx)
	if err != nil {
		return err
	}
	state := "clean"
	if r.Dirty {
		state = "dirty"
	}
	info := buildInfo{version: r.Version, commit: r.Commit, treeState: state, date: strings.TrimSpace(date)}
	args := []string{"go", "build", "-trimpath", "-tags", strings.Join(kubeBuildTags, ","),
		"-ldflags", strings.Join(append([]string{"-s", "-w", "-buildid="}, info.ldflags()...), " "), "-o", out + "/"}
	for _, c := range kubeCommands {
		args = append(args, "./cmd/"+c)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	cmd := run.Command(args...)
	cmd.Dir = r.tree
	cmd.Env = []string{"CGO_ENABLED=0"}
	if _, err := cmd.Output(ctx); err != nil {
		var rerr *run.Error
		if !errors.As(err, &rerr) {
			return err
		}
		log := filepath.Join(logDir, "tree-"+r.key+".build.log")
		_ = os.MkdirAll(logDir, 0o755)
		_ = os.WriteFile(log, rerr.Output, 0o644)
		return fmt.Errorf("source tree %s does not build: %s (the build's output: %s)", r.Path, lastLine(rerr.Output), log)
	}
	return nil
}

// built reads what the build of the tree made (readBinaries): the version
// its binaries report must be the one git gave the tree.
func (r *Release) built(ctx context.Context, dir string) error {
	v, err := r.readBinaries(ctx, dir)
	if err != nil {
		return fmt.Errorf("source tree %s: %w", r.Path, err)
	}
	if v != r.Version {
		return fmt.Errorf("source tree %s was built as %s, but its binaries report %s", r.Path, r.Version, v)
	}
	return nil
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
