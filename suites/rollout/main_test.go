// Package rollout proves the in-place strategy (kubeadm upgrades the same
// nodes, the kinder way) carries a control plane from the ha profile's
// version to the next minor under continuous traffic, and that bad or
// interrupted rollouts leave the cluster recoverable. The surge strategy's
// mixed window, rollback and roll-through are proven on the Mixed Version
// Proxy suite's cluster (suites/proxy), so no transition runs twice.
//
// The tests run in file order: the refused and the interrupted rollouts
// start from all-old control planes (upgrade_test.go goes last).
package rollout

import (
	"flag"
	"testing"

	"github.com/skewer-k8s/skewer/harness/suite"
	"github.com/skewer-k8s/skewer/harness/version"
)

var (
	s      *suite.Suite
	flagTo = version.MustParse("v1.36.3")
)

func init() { flag.Var(&flagTo, "rollout.to", "version the rollout goes to (default v1.36.3)") }

func TestMain(m *testing.M) { suite.Main(m, "ha", &s, &flagTo) }
