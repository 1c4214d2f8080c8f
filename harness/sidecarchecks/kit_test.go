package sidecarchecks

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The formula of KEP-753, on the Pods the resources check makes, and on a
// plain init container larger than everything else.
func TestEffectiveRequests(t *testing.T) {
	b := podBuilder{image: "img", ns: "ns", name: "p"}
	proxy := withRequests(b.container("proxy", "proxy"), "100m", "32Mi")
	setup := withRequests(b.container("setup", "app"), "500m", "64Mi")
	app := withRequests(b.container("app", "app"), "200m", "128Mi")
	huge := withRequests(b.container("huge", "app"), "2", "1Gi")
	for _, c := range []struct {
		name     string
		pod      *corev1.Pod
		cpu, mem string
	}{
		{"native", b.pod([]corev1.Container{native(proxy), setup}, []corev1.Container{app}), "600m", "160Mi"},
		{"legacy", b.pod([]corev1.Container{setup}, []corev1.Container{app, proxy}), "500m", "160Mi"},
		// A plain init container before the sidecar does not run beside it.
		{"init first", b.pod([]corev1.Container{huge, native(proxy)}, []corev1.Container{app}), "2", "1Gi"},
		{"sidecar first", b.pod([]corev1.Container{native(proxy), huge}, []corev1.Container{app}), "2100m", "1056Mi"},
	} {
		cpu, mem := effective(c.pod, corev1.ResourceCPU), effective(c.pod, corev1.ResourceMemory)
		if cpu.String() != c.cpu || mem.String() != c.mem {
			t.Errorf("%s: cpu %s, memory %s; want %s, %s", c.name, cpu.String(), mem.String(), c.cpu, c.mem)
		}
	}
}
