package sidecar

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/suite"
)

// TestMigration moves a helper to a native sidecar namespace by namespace,
// in batches with stop conditions: a batch that breaches one stops the
// expansion, and a rollback returns every migrated Deployment to its
// legacy template.
func TestMigration(t *testing.T) {
	f := features.New("migration in batches").WithLabel("area", "sidecar").
		// The fixture's sidecar "proxy" crashes on purpose.
		WithLabel(suite.RestartsLabel, "proxy").
		Assess("a breach stops the expansion; the rollback restores the legacy templates", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			cs := client(t)
			image := fixtureImage(ctx, t)
			var targets []sidecar.Target
			before := map[string]corev1.PodTemplateSpec{}
			for i := range 3 {
				ns := namespace(ctx, t, nil)
				// The second batch's helper crashes once in every new Pod: the breach.
				d := legacyDeployment(image, ns, i == 1)
				_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				created, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				tg := sidecar.Target{Namespace: ns, Name: d.Name}
				targets = append(targets, tg)
				before[tg.String()] = created.Spec.Template
			}
			for _, tg := range targets {
				g.Eventually(func() (int32, error) {
					d, err := cs.AppsV1().Deployments(tg.Namespace).Get(ctx, tg.Name, metav1.GetOptions{})
					return d.Status.AvailableReplicas, err
				}).WithTimeout(2*time.Minute).Should(BeEquivalentTo(1), "%s available", tg)
			}
			m := &sidecar.Migration{Client: cs, Helpers: []string{"proxy"},
				Batches: [][]sidecar.Target{{targets[0]}, {targets[1]}, {targets[2]}},
				Stop:    sidecar.StopConditions{ReadyWithin: 2 * time.Minute, MaxRestarts: 0},
				Settle:  10 * time.Second}
			results, err := m.Run(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			for i, r := range results {
				s.Measured(t, "migration batch %d %v: rolled out in %s, %d restarts; breach: %q", i+1, r.Targets, r.Took.Round(100*time.Millisecond), r.Restarts, r.Breach)
			}
			g.Expect(results).To(HaveLen(2), "the expansion stops at the breaching batch")
			g.Expect(results[0].Breach).To(BeEmpty())
			g.Expect(results[1].Breach).To(ContainSubstring("restarts"))
			third, err := cs.AppsV1().Deployments(targets[2].Namespace).Get(ctx, targets[2].Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(third.Annotations).NotTo(HaveKey(sidecar.LegacyAnnotation), "the batch after the breach is untouched")
			g.Expect(sidecar.TemplateHash(third.Spec.Template)).To(Equal(sidecar.TemplateHash(before[targets[2].String()])))

			g.Expect(sidecar.Rollback(ctx, cs, targets)).To(Succeed())
			for _, tg := range targets {
				d, err := cs.AppsV1().Deployments(tg.Namespace).Get(ctx, tg.Name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(sidecar.SameTemplate(before[tg.String()], d.Spec.Template)).To(Succeed(), "%s", tg)
				g.Eventually(func() (*appsv1.Deployment, error) {
					return cs.AppsV1().Deployments(tg.Namespace).Get(ctx, tg.Name, metav1.GetOptions{})
				}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(And(
					HaveField("Status.UpdatedReplicas", BeEquivalentTo(1)), HaveField("Status.AvailableReplicas", BeEquivalentTo(1)),
					HaveField("Status.Replicas", BeEquivalentTo(1))), "%s rolled back", tg)
			}
			s.Measured(t, "rollback: %d Deployments on their legacy template again (hash, ports, volumes, service account as before)", len(targets))
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// legacyDeployment runs the app with the proxy as a regular container.
func legacyDeployment(image, ns string, crashes bool) *appsv1.Deployment {
	b := podBuilder{image: image, ns: ns, name: "web"}
	args := []string{"-load-after", "0s"}
	if crashes {
		args = append(args, "-crash-after", "3s", "-crash-marker", "/shared/crashed")
	}
	proxy := b.container("proxy", "proxy", args...)
	proxy.Ports = []corev1.ContainerPort{{Name: "admin", ContainerPort: 8080}}
	pod := b.pod(nil, []corev1.Container{b.container("app", "app"), proxy})
	pod.Spec.ServiceAccountName = "web"
	one := int32(1)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
}
