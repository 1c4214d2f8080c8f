package sidecar

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// TestResources: a Pod's effective requests, as ResourceQuota accounts
// them, follow the sidecar rules: sidecars add to the app and to every
// init container after them; plain init containers take the max.
func TestResources(t *testing.T) {
	f := features.New("resources").WithLabel("area", "sidecar").
		Assess("ResourceQuota charges the sidecar formula, native and legacy alike", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			ns := namespace(ctx, t, nil)
			cs := client(t)
			_, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Name: "quota"},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
					corev1.ResourceRequestsCPU: resource.MustParse("10"), corev1.ResourceRequestsMemory: resource.MustParse("10Gi")}},
			}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			image := fixtureImage(ctx, t)
			for _, c := range []struct {
				name        string
				withSidecar bool
				cpu, memory string // what the formula gives
			}{
				// proxy sidecar 100m/32Mi, then setup 500m/64Mi; app 200m/128Mi.
				// cpu: max(100+500, 200+100) = 600m; memory: max(32+64, 128+32) = 160Mi.
				{"native", true, "600m", "160Mi"},
				// The same helper as a regular container: max(500, 200+100) = 500m; max(64, 128+32) = 160Mi.
				{"legacy", false, "500m", "160Mi"},
			} {
				b := podBuilder{image: image, ns: ns, name: c.name}
				proxy := withRequests(b.container("proxy", "proxy", "-load-after", "0s"), "100m", "32Mi")
				setup := withRequests(b.container("setup", "app", "-exit-after", "1s"), "500m", "64Mi")
				app := withRequests(b.container("app", "app"), "200m", "128Mi")
				var pod *corev1.Pod
				if c.withSidecar {
					pod = b.pod([]corev1.Container{native(proxy), setup}, []corev1.Container{app})
				} else {
					pod = b.pod([]corev1.Container{setup}, []corev1.Container{app, proxy})
				}
				wantCPU, wantMem := resource.MustParse(c.cpu), resource.MustParse(c.memory)
				cpuF, memF := effective(pod, corev1.ResourceCPU), effective(pod, corev1.ResourceMemory)
				g.Expect(cpuF.Cmp(wantCPU)).To(BeZero(), "the formula, computed here: cpu %s", cpuF.String())
				g.Expect(memF.Cmp(wantMem)).To(BeZero(), "the formula, computed here: memory %s", memF.String())
				_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				var used corev1.ResourceList
				g.Eventually(func() int {
					q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
					g.Expect(err).NotTo(HaveOccurred())
					used = q.Status.Used
					cpu := used[corev1.ResourceRequestsCPU]
					return cpu.Cmp(wantCPU)
				}).WithTimeout(30*time.Second).Should(BeZero(), "quota charges the %s Pod %s cpu", c.name, c.cpu)
				mem, cpu := used[corev1.ResourceRequestsMemory], used[corev1.ResourceRequestsCPU]
				g.Expect(mem.Cmp(wantMem)).To(BeZero(), "memory charged %s, want %s", mem.String(), c.memory)
				s.Measured(t, "%s helper: ResourceQuota charged requests.cpu=%s requests.memory=%s (formula %s, %s)", c.name, cpu.String(), mem.String(), c.cpu, c.memory)
				g.Expect(cs.CoreV1().Pods(ns).Delete(ctx, c.name, metav1.DeleteOptions{})).To(Succeed())
				waitGone(ctx, t, ns, c.name, 2*time.Minute)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// effective computes a Pod's effective request of one resource the way
// KEP-753 defines it: the larger of the app containers plus every sidecar,
// and each plain init container plus the sidecars started before it.
func effective(pod *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	var sidecars, peak resource.Quantity
	for _, c := range pod.Spec.InitContainers {
		r := c.Resources.Requests[name]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(r)
			continue
		}
		with := sidecars.DeepCopy()
		with.Add(r)
		if with.Cmp(peak) > 0 {
			peak = with
		}
	}
	apps := sidecars.DeepCopy()
	for _, c := range pod.Spec.Containers {
		apps.Add(c.Resources.Requests[name])
	}
	if apps.Cmp(peak) > 0 {
		peak = apps
	}
	return peak
}
