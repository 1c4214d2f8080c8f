package nodeimage

import (
	"strings"

	"github.com/skewer-k8s/skewer/harness/version"
)

// The pinned inputs of every image the builder makes besides Kubernetes itself.
// Each is part of the cache key of the images built from it, so changing one
// rebuilds exactly what depends on it.
const (
	containerdVersion = "v2.3.4" // what kind v0.33's base image ships
	runcVersion       = "v1.5.3"
	crictlVersion     = "v1.37.0" // cri-tools v1.36 is not served by the module proxy
	cniPluginsVersion = "v1.9.1"
	debianSuite       = "bookworm"
	debianMirror      = "http://deb.debian.org/debian"

	// recipeRevision changes whenever the recipe changes in a way that alters
	// its output without changing any input above.
	recipeRevision = "3"

	// loadBalancerImage is the image kind v0.33 starts as its HA load balancer
	// (sigs.k8s.io/kind/pkg/cluster/internal/loadbalancer.Image).
	loadBalancerImage = "docker.io/envoyproxy/envoy:v1.36.2"
	// cniImageRepo names the stand-in for kindnetd inside node images.
	cniImageRepo = "docker.io/kindest/kindnetd"
	// kindSandboxImage is the sandbox image kind's base containerd config names.
	kindSandboxImage = "registry.k8s.io/pause:3.10"

	// repo is the repository of node images built by skewer.
	repo = "skewer.local/node"
	// hostPrefix comes before an upstream name on the host (HostName).
	hostPrefix = "skewer.local/"
	// LocalBuildLabel marks every image skewer built on this machine.
	LocalBuildLabel = "io.skewer.build"
	keyLabel        = "io.skewer.key"
)

// HostName is the name on the host of an image skewer builds for its nodes
// under another's name (registry.k8s.io/kube-apiserver:v1.36.3 is
// skewer.local/registry.k8s.io/kube-apiserver:v1.36.3 there): the nodes know
// it by ref only, and a user's own image of that name is never shadowed.
func HostName(ref string) string { return hostPrefix + ref }

// Ref is the node image reference for a Kubernetes version built by skewer.
func Ref(v version.Version) string { return repo + ":" + tag(v) }

// tag is v as an image tag, which cannot hold a "+" (v1.36.3+k3s1 is
// tagged v1.36.3_k3s1, as kubeadm tags its images).
func tag(v version.Version) string { return strings.ReplaceAll(v.String(), "+", "_") }
