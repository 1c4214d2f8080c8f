package sidecarchecks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// CheckStripped deploys a mutating webhook that strips container-level
// restartPolicy (an old webhook) and judges sidecar.stripped.preflight (a
// server-side dry run of the final object detects it, creating nothing)
// and sidecar.stripped.shapes (a stripped sidecar with probes is rejected
// by the API; one without leaves its Pod stuck in Init, the app never
// started).
func (s *Sidecars) CheckStripped(ctx context.Context) []promise.Verdict {
	const preflight, shapes = "sidecar.stripped.preflight", "sidecar.stripped.shapes"
	target, done, err := s.deployStripper(ctx)
	if err != nil {
		return []promise.Verdict{failed(preflight, "the stripping webhook: %v", err), failed(shapes, "the stripping webhook: %v", err)}
	}
	defer done()
	ev, err := s.preflight(ctx, target)
	out := []promise.Verdict{verdict(preflight, ev, err)}
	ev, err = s.strippedShapes(ctx, target)
	return append(out, verdict(shapes, ev, err))
}

func (s *Sidecars) preflight(ctx context.Context, target string) ([]string, error) {
	pod := s.nativePod(target, "preflight", false)
	var lost []sidecar.Lost
	// The webhook's Service may take a moment to route: until then the
	// dry run is refused (failurePolicy Fail) and is tried again.
	if err := wait.For(ctx, "certify/sidecar-pod", "a server-side dry run through the stripping webhook", func(ctx context.Context) (bool, string, error) {
		var err error
		lost, err = sidecar.Preflight(ctx, s.cs, pod)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(lost) > 0, "the dry run's object kept every field", nil
	}); err != nil {
		return nil, err
	}
	if _, err := s.cs.CoreV1().Pods(target).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the dry run left Pod %s/%s behind (get: %v)", target, pod.Name, err)
	}
	ev := []string{fmt.Sprintf("preflight (server-side dry run) through the stripping webhook: %v lost, nothing created", lost)}
	line, err := s.migrationStopsBefore(ctx, target)
	return append(ev, line), err
}

// migrationStopsBefore migrates a Deployment whose Pods the webhook
// strips: the batch's check before it changes anything (a dry run of the
// new template's Pod) must stop it, naming the field, the Deployment
// left as it was.
func (s *Sidecars) migrationStopsBefore(ctx context.Context, ns string) (string, error) {
	tg, before, err := s.legacyDeployment(ctx, ns, false)
	if err != nil {
		return "", err
	}
	m := &sidecar.Migration{Client: s.cs, Helpers: []string{CrashingSidecar}, Batches: [][]sidecar.Target{{tg}},
		Stop: sidecar.StopConditions{ReadyWithin: time.Minute}}
	res, err := m.Run(ctx)
	if err != nil {
		return "", err
	}
	if err := stoppedBefore(tg, res); err != nil {
		return "", err
	}
	d, err := s.cs.AppsV1().Deployments(ns).Get(ctx, tg.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if _, touched := d.Annotations[sidecar.LegacyAnnotation]; touched || sidecar.TemplateHash(d.Spec.Template) != sidecar.TemplateHash(before.Template) {
		return "", fmt.Errorf("the migration stopped before %s, and changed it anyway", tg)
	}
	return fmt.Sprintf("a migration of %s through the webhook stopped before its batch, the Deployment unchanged: %s", tg, res[0].Breach), nil
}

// stoppedBefore judges sidecar.stripped.preflight on the batches of a
// migration of tg under the stripping webhook (res): its one batch
// stopped before it changed anything, naming restartPolicy.
func stoppedBefore(tg sidecar.Target, res []sidecar.BatchResult) error {
	if len(res) != 1 || !strings.HasPrefix(res[0].Breach, "before:") || !strings.Contains(res[0].Breach, "restartPolicy") {
		return fmt.Errorf("a migration of %s under the stripping webhook: want its batch stopped before it changed anything, naming restartPolicy; got %+v", tg, res)
	}
	return nil
}

// probedRejected judges the first shape of sidecar.stripped.shapes on how
// the API answered the create of a stripped sidecar with a startup probe
// (err): 422 Invalid, naming startupProbe.
func probedRejected(err error) ([]string, error) {
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "startupProbe") {
		return nil, fmt.Errorf("a stripped sidecar with a startup probe: want 422 Invalid naming startupProbe, got %v", err)
	}
	return []string{fmt.Sprintf("a stripped sidecar with a startup probe: %v", err)}, nil
}

func (s *Sidecars) strippedShapes(ctx context.Context, target string) ([]string, error) {
	pods := s.cs.CoreV1().Pods(target)
	_, err := pods.Create(ctx, s.nativePod(target, "with-probes", true), metav1.CreateOptions{})
	ev, err := probedRejected(err)
	if err != nil {
		return nil, err
	}
	pod := s.nativePod(target, "no-probes", false)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return ev, err
	}
	stuck, err := s.waitPod(ctx, "certify/sidecar-pod", target, pod.Name, "the helper running as a plain init container", func(p *corev1.Pod) bool {
		return len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].State.Running != nil
	})
	if err != nil {
		return ev, err
	}
	if stuck.Spec.InitContainers[0].RestartPolicy != nil {
		return ev, fmt.Errorf("Pod %s/%s was stored with restartPolicy %s: the webhook did not strip it", target, pod.Name, *stuck.Spec.InitContainers[0].RestartPolicy)
	}
	// The app never starts: looked at for 20 s, every 2 s.
	err = wait.Within(ctx, wait.Budget{Timeout: 20 * time.Second, Interval: 2 * time.Second}, "the app behind a stripped sidecar to start",
		func(ctx context.Context) (bool, string, error) {
			p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			stuck = p
			started := p.Status.Phase != corev1.PodPending
			for _, c := range p.Status.ContainerStatuses {
				started = started || c.State.Running != nil
			}
			return started, containerStates(p), nil
		})
	if err == nil {
		return ev, fmt.Errorf("the app behind a stripped sidecar started: %s", containerStates(stuck))
	}
	if !strings.Contains(err.Error(), "timed out") {
		return ev, err
	}
	return append(ev, fmt.Sprintf("a stripped sidecar without probes: Pod %s after 20 s (%s)", stuck.Status.Phase, containerStates(stuck))), nil
}

// nativePod is an app with a proxy meant as a native sidecar, in ns.
func (s *Sidecars) nativePod(ns, name string, probes bool) *corev1.Pod {
	b := podBuilder{image: s.image, ns: ns, name: name}
	proxy := native(b.container("proxy", "proxy", "-load-after", "1s"))
	if probes {
		proxy.StartupProbe = readyProbe()
	}
	return b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("app", "app")})
}

// deployStripper runs the stripping webhook in a namespace of its own,
// with a certificate made here, and returns a namespace whose Pods it
// mutates; done removes both namespaces and the webhook's configuration.
func (s *Sidecars) deployStripper(ctx context.Context) (target string, done func(), err error) {
	var cleanups []func()
	done = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	hookNS, doneHook, err := s.namespace(ctx, nil)
	if err != nil {
		return "", nil, err
	}
	cleanups = append(cleanups, doneHook)
	target, doneTarget, err := s.namespace(ctx, map[string]string{"skewer.io/strip": hookNS})
	if err != nil {
		return "", nil, err
	}
	cleanups = append(cleanups, doneTarget)
	certPEM, err := s.runStripper(ctx, hookNS)
	if err != nil {
		return "", nil, err
	}
	failPolicy, none, path := admissionregv1.Fail, admissionregv1.SideEffectClassNone, "/strip"
	cfg := &admissionregv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "skewer-strip-" + hookNS},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    "strip.skewer.io",
			ClientConfig:            admissionregv1.WebhookClientConfig{Service: &admissionregv1.ServiceReference{Namespace: hookNS, Name: "skewer-strip", Path: &path}, CABundle: certPEM},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"skewer.io/strip": hookNS}},
			FailurePolicy:           &failPolicy,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}}}
	hooks := s.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := hooks.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		return "", nil, err
	}
	cleanups = append(cleanups, func() { _ = hooks.Delete(context.WithoutCancel(ctx), cfg.Name, metav1.DeleteOptions{}) })
	if err := s.waitDeployment(ctx, hookNS, "skewer-strip", "ready", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 }); err != nil {
		return "", nil, err
	}
	return target, done, nil
}

// runStripper runs the stripping webhook in hookNS - its serving
// certificate in a Secret, a Deployment and a Service - and returns the
// certificate, its own CA.
func (s *Sidecars) runStripper(ctx context.Context, hookNS string) ([]byte, error) {
	certPEM, keyPEM, err := selfSigned("skewer-strip." + hookNS + ".svc")
	if err != nil {
		return nil, err
	}
	if _, err := s.cs.CoreV1().Secrets(hookNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	b := podBuilder{image: s.image, ns: hookNS, name: "skewer-strip"}
	c := b.container("webhook", "webhook", "-listen", ":8443")
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true})
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 1}
	pod := b.pod(nil, []corev1.Container{c})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}})
	one := int32(1)
	if _, err := s.cs.AppsV1().Deployments(hookNS).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "skewer-strip"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	_, err = s.cs.CoreV1().Services(hookNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "skewer-strip"},
		Spec: corev1.ServiceSpec{Selector: pod.Labels, Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}}}, metav1.CreateOptions{})
	return certPEM, err
}

// selfSigned makes a self-signed serving certificate for dnsName, its own
// CA: the webhook's, trusted through its configuration's caBundle alone.
func selfSigned(dnsName string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
