package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/skewer-k8s/skewer/harness/report"
)

// evidenceDir is where in --out a run's evidence goes (report.html links it).
const evidenceDir = report.EvidenceDir

// outDir makes --out ready for a run: writable, and holding no earlier
// run's results or evidence, which would mix with this one's (a report
// naming one run beside the audit logs of another). With force they are
// removed first; anything else in dir is left alone. A dry run checks the
// same and changes nothing (canWrite).
func outDir(dir string, force, dry bool) error {
	var earlier []string
	for _, name := range append(slices.Clone(report.Files), evidenceDir) {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			earlier = append(earlier, name)
		}
	}
	if len(earlier) > 0 && !force {
		return fmt.Errorf("%s holds an earlier run's %s: give an empty folder, or --force to replace them", dir, strings.Join(earlier, ", "))
	}
	if dry {
		return canWrite(dir)
	}
	for _, name := range earlier {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return writableDir(dir)
}

// canWrite says, touching nothing, whether dir could be made and written
// in: its nearest existing ancestor (or itself) is a directory this user
// may write in.
func canWrite(dir string) error {
	p := filepath.Clean(dir)
	for {
		fi, err := os.Stat(p)
		switch {
		case err == nil && !fi.IsDir():
			return fmt.Errorf("%s: not a directory", p)
		case err == nil:
			if err := syscall.Access(p, 2 /* W_OK */); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return err
		}
		p = parent
	}
}

// writableDir makes dir (the results' directory, which the run would make
// anyway) and proves a file can be written in it: a run whose results
// could not be kept is refused before it creates anything, not after.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".skewer-write-test-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}
