// Package proxy proves what the Mixed Version Proxy (KEP-4020) promises and
// where it stops, and the surge rollout around it, on one real HA cluster
// taken through the certify shape in as few transitions as the promises
// allow: one control plane at the newer version (the proxy's checks and
// faults), the gate switched off and on, a rollback to all-old under
// traffic, forward again to two of three at the newer version, then
// through, the same traffic judged at the end (no acknowledged write lost,
// no watch event missed, no false 404). The tests run in that order.
// Every assertion logs its evidence: audit IDs, metric deltas, codes and
// bodies. Facts about the proxy it relies on: ../../docs/proxy.md.
package proxy

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

func init() { flag.Var(&flagTo, "proxy.to", "the newer version of the mixed window (default v1.36.3)") }

func TestMain(m *testing.M) { suite.Main(m, "ha", &s, &flagTo) }
