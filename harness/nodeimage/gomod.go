package nodeimage

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/skewer-k8s/skewer/internal/run"
)

// goBuild builds packages of a module version served by the Go module proxy,
// from a wrapper module of its own, into Out.
type goBuild struct {
	// Name names the wrapper module's directory in the cache.
	Name string
	// Require maps module paths to the versions the wrapper requires.
	Require map[string]string
	// Replace maps module paths to the version the wrapper pins them to.
	Replace  map[string]string
	Packages []string
	CGO      bool
	Tags     []string
	LDFlags  []string
	Out      string
}

// moduleInfo is what `go mod download -json` says of a module version.
type moduleInfo struct {
	Version string
	Time    string
	GoMod   string
	Dir     string
	Error   string
}

// downloadModule fetches a module version from the module proxy.
func downloadModule(ctx context.Context, module, version string) (*moduleInfo, error) {
	out, err := run.Command("go", "mod", "download", "-json", module+"@"+version).Output(ctx)
	var info moduleInfo
	if jerr := json.Unmarshal(out, &info); jerr != nil {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("failed to read go mod download output: %w", jerr)
	}
	if info.Error != "" {
		return nil, fmt.Errorf("%s@%s is not served by the Go module proxy: %s", module, version, info.Error)
	}
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// requiredPlaceholders lists the modules a go.mod requires at v0.0.0, the
// way Kubernetes requires its staging modules and replaces them with paths.
func requiredPlaceholders(goMod string) ([]string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mods []string
	inRequire := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			inRequire = true
			continue
		case inRequire && line == ")":
			inRequire = false
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, "require "))
		if (inRequire || strings.HasPrefix(line, "require ")) && len(fields) >= 2 && fields[1] == "v0.0.0" {
			mods = append(mods, fields[0])
		}
	}
	return mods, sc.Err()
}

// wrapperGoMod is the go.mod of the module that builds gb.
func wrapperGoMod(gb goBuild) string {
	var s strings.Builder
	s.WriteString("module skewer.local/build\n\ngo 1.26\n")
	block := func(keyword string, mods map[string]string, format string) {
		if len(mods) == 0 {
			return
		}
		fmt.Fprintf(&s, "\n%s (\n", keyword)
		for _, m := range sortedKeys(mods) {
			fmt.Fprintf(&s, format, m, mods[m])
		}
		s.WriteString(")\n")
	}
	block("require", gb.Require, "\t%s %s\n")
	block("replace", gb.Replace, "\t%[1]s => %[1]s %[2]s\n")
	return s.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (p *plan) goBuild(ctx context.Context, gb goBuild) error {
	dir := p.b.cacheDir("src", gb.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	goMod := wrapperGoMod(gb)
	if old, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(old) != goMod {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
			return err
		}
		_ = os.Remove(filepath.Join(dir, "go.sum"))
	}
	if err := os.MkdirAll(gb.Out, 0o755); err != nil {
		return err
	}
	cgo := "0"
	if gb.CGO {
		cgo = "1"
	}
	args := []string{"go", "build", "-trimpath", "-o", gb.Out + "/"}
	if len(gb.Tags) > 0 {
		args = append(args, "-tags", strings.Join(gb.Tags, ","))
	}
	args = append(args, "-ldflags", strings.Join(append([]string{"-s", "-w", "-buildid="}, gb.LDFlags...), " "))
	args = append(args, gb.Packages...)
	cmd := run.Command(args...)
	cmd.Dir = dir
	cmd.Env = []string{"CGO_ENABLED=" + cgo, "GOFLAGS=-mod=mod", "GOWORK=off"}
	return cmd.Run(ctx)
}

// cachedDir runs build into a fresh directory named by key unless a complete
// one exists; a marker file tells complete from interrupted. Each build
// writes into a temporary directory of its own beside dir, locked while it
// runs: two runs building the same thing at once must not remove each
// other's output (a shared dir+".tmp" did, mid-build), and what a killed
// build left is removed by the next one, which finds it unlocked. The
// first to finish installs its result; a later one finds it complete and
// drops its own.
func cachedDir(dir string, build func(dir string) error) (cached bool, err error) {
	marker := filepath.Join(dir, ".complete")
	if _, err := os.Stat(marker); err == nil {
		return true, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, err
	}
	sweepTemporary(dir)
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	lock, err := lockDir(tmp)
	if err != nil {
		return false, err
	}
	defer lock.Close()
	if err := build(tmp); err != nil {
		return false, err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return false, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's is 0700
		return false, err
	}
	if _, err := os.Stat(marker); err == nil {
		return true, nil // another build finished first: its result stands
	}
	_ = os.RemoveAll(dir) // an interrupted build's leftovers
	return false, os.Rename(tmp, dir)
}

// lockDir takes an exclusive lock on dir, held until the file is closed or
// the process ends, however it ends.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// sweepTemporary removes the temporary directories of builds of dir that
// no longer run (killed, or from before they were locked): a running
// build holds its lock.
func sweepTemporary(dir string) {
	left, _ := filepath.Glob(dir + ".tmp*")
	for _, d := range left {
		if lock, err := lockDir(d); err == nil {
			_ = os.RemoveAll(d)
			lock.Close()
		}
	}
}
