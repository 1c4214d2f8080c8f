// Package source finds skewer's own source: the checkout the working
// directory is in, or else the copy of it the binary carries (what `go
// install` users have). The image builder compiles the stand-ins, the
// fixtures and the relay from it; profiles and waivers are read from it.
package source

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	skewer "github.com/skewer-k8s/skewer"
)

// module is skewer's module path.
const module = "github.com/skewer-k8s/skewer"

// Root is $SKEWER_SOURCE, else the nearest directory from the working
// directory up whose go.mod declares skewer's module, else the copy of
// the source this binary carries, written out once under CacheDir().
func Root() (string, error) {
	if d := os.Getenv("SKEWER_SOURCE"); d != "" {
		return d, nil
	}
	if dir, ok := Checkout(); ok {
		return dir, nil
	}
	return embedded()
}

// Checkout is the skewer checkout the working directory is in, if any.
func Checkout() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// CacheDir is $SKEWER_CACHE, else the user cache directory's skewer/:
// where built inputs and images' keys are kept.
func CacheDir() string {
	if d := os.Getenv("SKEWER_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "skewer")
}

var copied struct {
	once sync.Once
	dir  string
	err  error
}

// embedded writes the binary's copy of the source to
// CacheDir()/source/<digest of its files> unless it is there already, and
// returns that directory. The copy is made beside it and renamed into
// place, so a reader never sees half of one.
func embedded() (string, error) {
	copied.once.Do(func() {
		digest, err := digestFS(skewer.Source)
		if err != nil {
			copied.err = err
			return
		}
		dir := filepath.Join(CacheDir(), "source", digest[:16])
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			copied.dir = dir
			return
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			copied.err = err
			return
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".copy-")
		if err != nil {
			copied.err = err
			return
		}
		defer os.RemoveAll(tmp)
		if err := os.CopyFS(tmp, skewer.Source); err != nil {
			copied.err = fmt.Errorf("failed to write skewer's source to %s: %w", tmp, err)
			return
		}
		if err := os.Rename(tmp, dir); err != nil {
			// Another skewer wrote the same copy first: use it.
			if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr != nil {
				copied.err = fmt.Errorf("failed to put skewer's source in %s: %w", dir, err)
				return
			}
		}
		copied.dir = dir
	})
	return copied.dir, copied.err
}

// digestFS digests every file's path and content.
func digestFS(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func declaresModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	return sc.Scan() && strings.TrimSpace(sc.Text()) == "module "+module
}
