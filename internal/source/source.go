// Package source finds skewer's own checkout, which holds the stand-in
// programs the image builder compiles and the _artifacts directory.
package source

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// module is skewer's module path.
const module = "github.com/skewer-k8s/skewer"

// Root is $SKEWER_SOURCE, else the nearest directory from the working
// directory up whose go.mod declares module.
func Root() (string, error) {
	if d := os.Getenv("SKEWER_SOURCE"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside skewer's checkout: run from it or set SKEWER_SOURCE")
		}
		dir = parent
	}
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
