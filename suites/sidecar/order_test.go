package sidecar

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/fixtures"
)

// TestStartOrder: the app starts only after its native sidecar has
// started, and, when a startup probe gates the sidecar, after it is ready.
func TestStartOrder(t *testing.T) {
	f := features.New("start order").WithLabel("area", "sidecar").
		Assess("the app starts after the sidecar is ready (startup probe), on every kubelet", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, w := range workers(ctx, t) {
				startOrder(ctx, t, w, true)
			}
			return ctx
		}).
		Assess("without a startup probe, the app starts after the sidecar has started", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, w := range workers(ctx, t) {
				startOrder(ctx, t, w, false)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

func startOrder(ctx context.Context, t *testing.T, w worker, probe bool) {
	g := NewWithT(t)
	ns := namespace(ctx, t, nil)
	b := podBuilder{image: fixtureImage(ctx, t), ns: ns, name: "order", node: w.Name}
	proxy := native(b.container("proxy", "proxy", "-load-after", "3s"))
	if probe {
		proxy.StartupProbe = readyProbe()
	}
	app := b.container("app", "app", "-ready-url", "http://127.0.0.1:8080/ready")
	_, err := client(t).CoreV1().Pods(ns).Create(ctx, b.pod([]corev1.Container{proxy}, []corev1.Container{app}), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pod := waitPod(ctx, t, ns, b.name, 2*time.Minute, "app running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	var ev []fixtures.Event
	g.Eventually(func() []fixtures.Event {
		ev = readEvents(ctx, t, w.Node, ns, b.name)
		return ev
	}).WithTimeout(30*time.Second).Should(ContainElement(HaveField("Who", "app")), "the app's start event")
	logEvents(t, fmt.Sprintf("%s (kubelet %s), startup probe %v", w.Name, w.Version, probe), ev)
	proxyStart, ok := fixtures.First(ev, "proxy", "start")
	g.Expect(ok).To(BeTrue(), "the sidecar recorded its start")
	appStart, _ := fixtures.First(ev, "app", "start")
	g.Expect(appStart).To(BeTemporally(">", proxyStart), "the app started after the sidecar")
	// Container statuses say the same, to the second.
	g.Expect(pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time).
		To(BeTemporally(">=", pod.Status.InitContainerStatuses[0].State.Running.StartedAt.Time))
	if probe {
		ready, ok := fixtures.First(ev, "proxy", "ready")
		g.Expect(ok).To(BeTrue(), "the sidecar loaded its configuration")
		g.Expect(appStart).To(BeTemporally(">", ready), "the app started after the sidecar was ready")
		g.Expect(ev).To(ContainElement(HaveField("What", "start proxy-ready=true")))
		s.Measured(t, "%s (kubelet %s): sidecar ready %s after it started; app started %s after it was ready",
			w.Name, w.Version, ready.Sub(proxyStart).Round(time.Millisecond), appStart.Sub(ready).Round(time.Millisecond))
	} else {
		s.Measured(t, "%s (kubelet %s), no startup probe: app started %s after the sidecar started (%s)",
			w.Name, w.Version, appStart.Sub(proxyStart).Round(time.Millisecond), ev[len(ev)-1].What)
	}
}
