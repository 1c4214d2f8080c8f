// Package bench measures skewer against the plain tools in the same run:
// node image builds (cold and warm) and HA cluster creation against the kind
// CLI with the same configuration and images. Run with `make bench`; every
// figure is printed, none is asserted against a fixed time.
package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// versions are the versions to measure, from $VERSIONS (as make passes them).
var versions = mustVersions(strings.Fields(envOr("VERSIONS", "v1.35.4 v1.36.3")))

func mustVersions(in []string) []version.Version {
	vs, err := version.ParseList(in)
	if err != nil {
		panic(fmt.Sprintf("VERSIONS: %v", err))
	}
	return vs
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func needDocker(b *testing.B) {
	if err := docker.Ping(context.Background()); err != nil {
		b.Skip(err)
	}
}

// report prints one figure in a form a reader and benchstat both read.
func report(b *testing.B, value float64, unit string) {
	b.ReportMetric(value, unit)
	fmt.Printf("  %-60s %12.2f %s\n", b.Name(), value, unit)
}

// kindCLI builds the kind command from the module this repository pins:
// the plain tool skewer is compared with.
func kindCLI(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "kind")
	out, err := exec.Command("go", "build", "-o", bin, "sigs.k8s.io/kind").CombinedOutput()
	if err != nil {
		b.Fatalf("failed to build the kind CLI: %v: %s", err, out)
	}
	return bin
}
