package sidecar

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/suite"
)

// TestReadiness: a native sidecar's readiness gates its Pod's, and a
// sidecar that crashes is restarted alone.
func TestReadiness(t *testing.T) {
	f := features.New("readiness and restarts").WithLabel("area", "sidecar").
		// The fixture's sidecar "proxy" crashes on purpose.
		WithLabel(suite.RestartsLabel, "proxy").
		Assess("a sidecar that never turns ready keeps its Pod out of the Service and halts the rollout", readinessHalts).
		Assess("a sidecar that crashes is restarted alone, on every kubelet", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, w := range workers(ctx, t) {
				crashAlone(ctx, t, w)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

func readinessHalts(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	ns := namespace(ctx, t, nil)
	cs := client(t)
	b := podBuilder{image: fixtureImage(ctx, t), ns: ns, name: "web"}
	proxy := native(b.container("proxy", "proxy", "-load-after", "2s"))
	proxy.ReadinessProbe = readyProbe()
	proxy.ReadinessProbe.FailureThreshold = 1
	pod := b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("app", "app")})
	one, zero, deadline := intstr.FromInt32(1), intstr.FromInt32(0), int32(20)
	replicas := int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, ProgressDeadlineSeconds: &deadline,
			Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: pod.Labels, Ports: []corev1.ServicePort{{Port: 8080}}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (int32, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return d.Status.AvailableReplicas, err
	}).WithTimeout(2 * time.Minute).Should(BeEquivalentTo(1))

	// The next template's sidecar never loads its configuration.
	cur, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	cur.Spec.Template.Spec.InitContainers[0].Args = append(cur.Spec.Template.Spec.InitContainers[0].Args[:len(cur.Spec.Template.Spec.InitContainers[0].Args)-2], "-load-after", "1h")
	_, err = cs.AppsV1().Deployments(ns).Update(ctx, cur, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (*appsv1.Deployment, error) {
		return cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(HaveField("Status.Conditions", ContainElement(And(
		HaveField("Type", appsv1.DeploymentProgressing), HaveField("Reason", "ProgressDeadlineExceeded")))), "the rollout halts")
	halted, _ := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	g.Expect(halted.Status.AvailableReplicas).To(BeEquivalentTo(1), "the old Pod still serves")

	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(2))
	ready := map[string]bool{}
	var newPod corev1.Pod
	for _, p := range pods.Items {
		ready[p.Status.PodIP] = podReady(&p)
		if !podReady(&p) {
			newPod = p
		}
	}
	g.Expect(newPod.Name).NotTo(BeEmpty(), "a Pod of the new template, not ready")
	eps, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	g.Expect(err).NotTo(HaveOccurred())
	serving := map[string]bool{}
	for _, sl := range eps.Items {
		for _, ep := range sl.Endpoints {
			for _, a := range ep.Addresses {
				serving[a] = ep.Conditions.Ready != nil && *ep.Conditions.Ready
			}
		}
	}
	g.Expect(serving[newPod.Status.PodIP]).To(BeFalse(), "the new Pod (%s) is not a ready endpoint", newPod.Status.PodIP)
	for ip, r := range ready {
		if r {
			g.Expect(serving[ip]).To(BeTrue(), "the old Pod (%s) still is", ip)
		}
	}
	s.Measured(t, "a sidecar that never turns ready: Deployment halted (ProgressDeadlineExceeded, %d available); new Pod %s not a ready endpoint (%s)",
		halted.Status.AvailableReplicas, newPod.Name, containerStates(&newPod))
	return ctx
}

// crashAlone makes a sidecar exit with an error once and checks that the
// kubelet restarted it, and nothing else.
func crashAlone(ctx context.Context, t *testing.T, w worker) {
	g := NewWithT(t)
	ns := namespace(ctx, t, nil)
	b := podBuilder{image: fixtureImage(ctx, t), ns: ns, name: "crash", node: w.Name}
	proxy := native(b.container("proxy", "proxy", "-load-after", "0s", "-crash-after", "5s", "-crash-marker", "/shared/crashed"))
	_, err := client(t).CoreV1().Pods(ns).Create(ctx, b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("app", "app")}), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	before := waitPod(ctx, t, ns, b.name, 2*time.Minute, "app running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	appStarted := before.Status.ContainerStatuses[0].State.Running.StartedAt
	after := waitPod(ctx, t, ns, b.name, 2*time.Minute, "the sidecar restarted once and running", func(p *corev1.Pod) bool {
		st := p.Status.InitContainerStatuses
		return len(st) == 1 && st[0].RestartCount == 1 && st[0].State.Running != nil
	})
	app := after.Status.ContainerStatuses[0]
	g.Expect(app.RestartCount).To(BeZero(), "the app was not restarted")
	g.Expect(app.State.Running).NotTo(BeNil())
	g.Expect(app.State.Running.StartedAt).To(Equal(appStarted), "the app kept running throughout")
	ev := readEvents(ctx, t, w.Node, ns, b.name)
	logEvents(t, fmt.Sprintf("%s (kubelet %s)", w.Name, w.Version), ev)
	starts := 0
	for _, e := range ev {
		if e.Who == "proxy" && e.What == "start" {
			starts++
		}
	}
	g.Expect(starts).To(Equal(2), "the sidecar started, crashed and started again")
	crashed, _ := fixtures.First(ev, "proxy", "crash")
	s.Measured(t, "%s (kubelet %s): the sidecar crashed at %s and was restarted alone (restarts: sidecar %d, app %d)",
		w.Name, w.Version, crashed.UTC().Format("15:04:05.000"), after.Status.InitContainerStatuses[0].RestartCount, app.RestartCount)
}
