package sidecar

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/sidecar"
)

// TestStrippedField: with a mutating webhook that strips container-level
// restartPolicy (an old webhook or client), a preflight sees it before
// anything rolls out, and both ways it fails are shown.
func TestStrippedField(t *testing.T) {
	var target string
	f := features.New("a webhook strips restartPolicy").WithLabel("area", "sidecar").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			target = deployStripper(ctx, t)
			return ctx
		}).
		Assess("a server-side dry run of the final object detects the stripped field, creating nothing", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			pod := nativePod(ctx, t, target, "preflight", false)
			var lost []sidecar.Lost
			g.Eventually(func() ([]sidecar.Lost, error) {
				var err error
				lost, err = sidecar.Preflight(ctx, client(t), pod)
				return lost, err
			}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).ShouldNot(BeEmpty(), "the webhook in the path")
			_, err := client(t).CoreV1().Pods(target).Get(ctx, pod.Name, metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the dry run created nothing")
			s.Measured(t, "preflight (server-side dry run) through the stripping webhook: %v lost", lost)
			return ctx
		}).
		Assess("a sidecar with probes is rejected by the API", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			_, err := client(t).CoreV1().Pods(target).Create(ctx, nativePod(ctx, t, target, "with-probes", true), metav1.CreateOptions{})
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("startupProbe"))
			s.Measured(t, "a stripped sidecar with a startup probe: %v", err)
			return ctx
		}).
		Assess("a sidecar without probes leaves the Pod stuck in Init", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			pod := nativePod(ctx, t, target, "no-probes", false)
			_, err := client(t).CoreV1().Pods(target).Create(ctx, pod, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			stuck := waitPod(ctx, t, target, pod.Name, 2*time.Minute, "the helper running as a plain init container", func(p *corev1.Pod) bool {
				return len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].State.Running != nil
			})
			g.Expect(stuck.Spec.InitContainers[0].RestartPolicy).To(BeNil(), "stored without restartPolicy")
			g.Consistently(func() (*corev1.Pod, error) {
				return client(t).CoreV1().Pods(target).Get(ctx, pod.Name, metav1.GetOptions{})
			}).WithTimeout(20*time.Second).WithPolling(2*time.Second).Should(And(
				HaveField("Status.Phase", corev1.PodPending),
				HaveField("Status.ContainerStatuses", HaveEach(HaveField("State.Running", BeNil()))),
			), "the app never starts")
			p, _ := client(t).CoreV1().Pods(target).Get(ctx, pod.Name, metav1.GetOptions{})
			s.Measured(t, "a stripped sidecar without probes: Pod %s after 20 s (%s)", p.Status.Phase, containerStates(p))
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// nativePod is an app with a proxy meant as a native sidecar, in ns.
func nativePod(ctx context.Context, t *testing.T, ns, name string, probes bool) *corev1.Pod {
	b := podBuilder{image: fixtureImage(ctx, t), ns: ns, name: name}
	proxy := native(b.container("proxy", "proxy", "-load-after", "1s"))
	if probes {
		proxy.StartupProbe = readyProbe()
	}
	return b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("app", "app")})
}

// deployStripper runs the stripping webhook in a namespace of its own,
// with a certificate made here, and returns a namespace whose Pods it
// mutates. Its configuration is removed when the test ends.
func deployStripper(ctx context.Context, t *testing.T) string {
	g := NewWithT(t)
	cs := client(t)
	hookNS := namespace(ctx, t, nil)
	target := namespace(ctx, t, map[string]string{"skewer.io/strip": hookNS})
	certPEM, keyPEM := selfSigned(t, "skewer-strip."+hookNS+".svc")
	_, err := cs.CoreV1().Secrets(hookNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	b := podBuilder{image: fixtureImage(ctx, t), ns: hookNS, name: "skewer-strip"}
	c := b.container("webhook", "webhook", "-listen", ":8443")
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true})
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 1}
	pod := b.pod(nil, []corev1.Container{c})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}})
	one := int32(1)
	_, err = cs.AppsV1().Deployments(hookNS).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "skewer-strip"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Services(hookNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "skewer-strip"},
		Spec: corev1.ServiceSpec{Selector: pod.Labels, Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	fail, none := admissionregv1.Fail, admissionregv1.SideEffectClassNone
	path := "/strip"
	cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "skewer-strip-" + hookNS},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    "strip.skewer.io",
			ClientConfig:            admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Namespace: hookNS, Name: "skewer-strip", Path: &path}, CABundle: certPEM},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"skewer.io/strip": hookNS}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}}}
	_, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
	g.Eventually(func() (int32, error) {
		d, err := cs.AppsV1().Deployments(hookNS).Get(ctx, "skewer-strip", metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return d.Status.ReadyReplicas, nil
	}).WithTimeout(2*time.Minute).Should(BeEquivalentTo(1), "the webhook ready")
	return target
}

// selfSigned makes a self-signed serving certificate for dnsName, its own CA.
func selfSigned(t *testing.T, dnsName string) (certPEM, keyPEM []byte) {
	g := NewWithT(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
