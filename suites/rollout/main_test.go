// Package rollout proves a rolling control-plane replacement from the ha
// profile's version to the next minor safe under continuous traffic: held in
// the mixed window, rolled back, then carried through.
package rollout

import (
	"flag"
	"testing"

	"github.com/skewer-k8s/skewer/harness/suite"
)

var (
	s      *suite.Suite
	flagTo = flag.String("rollout.to", "v1.36.3", "version the rollout goes to")
)

func TestMain(m *testing.M) { suite.Main(m, "ha", &s) }
