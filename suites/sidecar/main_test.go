// Package sidecar proves a migration of helpers from regular containers
// to native sidecars (init containers with restartPolicy: Always) safe, on
// the sidecar profile: one control plane at v1.36.3 and workers whose
// kubelets run v1.35.4 and v1.36.3, so every kubelet behaviour is checked
// on both sides of the skew. The Pods run skewer's own fixtures
// (../../fixtures), built into a local image and loaded into the nodes.
package sidecar

import (
	"testing"

	"github.com/skewer-k8s/skewer/harness/suite"
)

var s *suite.Suite

func TestMain(m *testing.M) { suite.Main(m, "sidecar", &s) }
