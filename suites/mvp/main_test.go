// Package mvp proves what the Mixed Version Proxy (KEP-4020) promises and
// where it stops, on a real HA cluster held in the mixed window by a surge
// rollout: one, then two of three control planes at the newer version.
// Every assertion logs its evidence: audit IDs, metric deltas, codes and
// bodies. Facts about the proxy it relies on: ../../docs/mvp.md.
package mvp

import (
	"flag"
	"testing"

	"github.com/skewer-k8s/skewer/harness/suite"
)

var (
	s      *suite.Suite
	flagTo = flag.String("mvp.to", "v1.36.3", "the newer version of the mixed window")
)

func TestMain(m *testing.M) { suite.Main(m, "ha", &s) }
