// Package smoke proves the cluster lifecycle every other suite stands on, on
// the ha profile: three control planes behind kind's load balancer and a worker.
package smoke

import (
	"testing"

	"github.com/skewer-k8s/skewer/harness/suite"
)

var s *suite.Suite

func TestMain(m *testing.M) { suite.Main(m, "ha", &s) }
