package sidecarchecks

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// sizedCase is one shape of the resource checks' Pod: a proxy 100m/32Mi,
// a setup init container 500m/64Mi and an app 200m/128Mi, the proxy a
// native sidecar (before setup) or a regular container beside the app,
// and what KEP-753's formula makes of it.
type sizedCase struct {
	name        string
	withSidecar bool
	cpu, memory string
}

var sizedCases = []sizedCase{
	// cpu: max(100+500, 200+100) = 600m; memory: max(32+64, 128+32) = 160Mi.
	{"native", true, "600m", "160Mi"},
	// As a regular container: max(500, 200+100) = 500m; max(64, 128+32) = 160Mi.
	{"legacy", false, "500m", "160Mi"},
}

// sizedPod is c's Pod in ns (on node, if given); with limits every
// container's limits equal its requests: a Guaranteed Pod.
func (s *Sidecars) sizedPod(ns, node string, c sizedCase, limits bool) *corev1.Pod {
	b := podBuilder{image: s.image, ns: ns, name: c.name, node: node}
	size := func(c corev1.Container, cpu, memory string) corev1.Container {
		c = withRequests(c, cpu, memory)
		if limits {
			c.Resources.Limits = c.Resources.Requests.DeepCopy()
		}
		return c
	}
	proxy := size(b.container("proxy", "proxy", "-load-after", "0s"), "100m", "32Mi")
	setup := size(b.container("setup", "app", "-exit-after", "1s"), "500m", "64Mi")
	app := size(b.container("app", "app"), "200m", "128Mi")
	if c.withSidecar {
		return b.pod([]corev1.Container{native(proxy), setup}, []corev1.Container{app})
	}
	return b.pod([]corev1.Container{setup}, []corev1.Container{app, proxy})
}

// CheckResources judges sidecar.resources.formula (the requests
// ResourceQuota charges a Pod follow KEP-753's formula, computed here,
// with the helper as a native sidecar and as a regular container) and
// sidecar.resources.quota-admission (a quota between the two admits the
// legacy Pod and rejects the native one, by that formula).
func (s *Sidecars) CheckResources(ctx context.Context) []promise.Verdict {
	ev, err := s.resources(ctx)
	out := []promise.Verdict{verdict("sidecar.resources.formula", ev, err)}
	ev, err = s.quotaAdmission(ctx)
	return append(out, verdict("sidecar.resources.quota-admission", ev, err))
}

func (s *Sidecars) resources(ctx context.Context) ([]string, error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.quota(ctx, ns, "10"); err != nil {
		return nil, err
	}
	var ev []string
	for _, c := range sizedCases {
		pod := s.sizedPod(ns, "", c, false)
		want := corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse(c.cpu), corev1.ResourceRequestsMemory: resource.MustParse(c.memory)}
		computed := corev1.ResourceList{corev1.ResourceRequestsCPU: effective(pod, corev1.ResourceCPU), corev1.ResourceRequestsMemory: effective(pod, corev1.ResourceMemory)}
		for r, q := range want {
			if got := computed[r]; got.Cmp(q) != 0 {
				return ev, fmt.Errorf("the formula, computed here, gives the %s Pod %s %s, the case says %s", c.name, r, got.String(), q.String())
			}
		}
		if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return ev, err
		}
		used, err := s.waitCharged(ctx, ns, c)
		if err != nil {
			return ev, err
		}
		ev = append(ev, fmt.Sprintf("%s helper: ResourceQuota charged %s (formula %s, %s)", c.name, used, c.cpu, c.memory))
		if err := s.removePod(ctx, ns, c.name); err != nil {
			return ev, err
		}
	}
	return ev, nil
}

// quota sets a ResourceQuota of cpu requests (and ample memory) on ns and
// waits until the quota controller has computed its status: until then
// the quota admission refuses every Pod.
func (s *Sidecars) quota(ctx context.Context, ns, cpu string) error {
	if _, err := s.cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "quota"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU: resource.MustParse(cpu), corev1.ResourceRequestsMemory: resource.MustParse("10Gi")}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.For(ctx, "certify/sidecar-event", "the ResourceQuota's status computed", func(ctx context.Context) (bool, string, error) {
		q, err := s.cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		_, ok := q.Status.Hard[corev1.ResourceRequestsCPU]
		return ok, fmt.Sprintf("status %v", q.Status.Hard), nil
	})
}

// waitCharged waits until ns's quota charges c's formula, and says what
// it charged.
func (s *Sidecars) waitCharged(ctx context.Context, ns string, c sizedCase) (string, error) {
	var charged string
	err := wait.For(ctx, "certify/sidecar-event", fmt.Sprintf("ResourceQuota to charge the %s Pod requests.cpu=%s requests.memory=%s", c.name, c.cpu, c.memory),
		func(ctx context.Context) (bool, string, error) {
			q, err := s.cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			var ok bool
			charged, ok = chargedFormula(q.Status.Used, c)
			return ok, "charged " + charged, nil
		})
	return charged, err
}

// chargedFormula judges sidecar.resources.formula on what a quota holding
// c's Pod alone charges (used): c's formula. It says what was charged.
func chargedFormula(used corev1.ResourceList, c sizedCase) (string, bool) {
	cpu, mem := used[corev1.ResourceRequestsCPU], used[corev1.ResourceRequestsMemory]
	return fmt.Sprintf("requests.cpu=%s requests.memory=%s", cpu.String(), mem.String()),
		cpu.Cmp(resource.MustParse(c.cpu)) == 0 && mem.Cmp(resource.MustParse(c.memory)) == 0
}

// quotaAdmission sets a quota of 550m CPU requests, between the two
// cases' formulas: the native Pod (600m) must be refused with the quota's
// own reason, the legacy one (500m) admitted and charged. The native Pod
// goes first, so nothing else in the namespace counts against it.
func (s *Sidecars) quotaAdmission(ctx context.Context) ([]string, error) {
	const hard = quotaHard
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.quota(ctx, ns, hard); err != nil {
		return nil, err
	}
	nat, leg := sizedCases[0], sizedCases[1]
	_, err = s.cs.CoreV1().Pods(ns).Create(ctx, s.sizedPod(ns, "", nat, false), metav1.CreateOptions{})
	ev, err := nativeRefused(hard, err)
	if err != nil {
		return nil, err
	}
	if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, s.sizedPod(ns, "", leg, false), metav1.CreateOptions{}); err != nil {
		return ev, fmt.Errorf("the legacy Pod (formula requests.cpu=%s) was refused under a quota of %s: %w", leg.cpu, hard, err)
	}
	used, err := s.waitCharged(ctx, ns, leg)
	if err != nil {
		return ev, err
	}
	return append(ev, fmt.Sprintf("the legacy Pod (formula %s) admitted and charged %s: the same helper fits as a regular container and not as a native sidecar, because a sidecar's requests add to every init container after it", leg.cpu, used)), nil
}

// quotaHard is the quota of CPU requests the admission case sets, between
// the two cases' formulas.
const quotaHard = "550m"

// nativeRefused judges sidecar.resources.quota-admission on how the API
// answered the create of the native Pod under a quota of hard CPU
// requests (err): refused for the quota, by the formula's requests.
func nativeRefused(hard string, err error) ([]string, error) {
	nat := sizedCases[0]
	switch {
	case err == nil:
		return nil, fmt.Errorf("the native Pod (formula requests.cpu=%s) was admitted under a quota of requests.cpu=%s", nat.cpu, hard)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") || !strings.Contains(err.Error(), "requests.cpu="+nat.cpu):
		return nil, fmt.Errorf("the native Pod was refused, but not for the quota's %s by the formula's %s: %v", hard, nat.cpu, err)
	}
	return []string{fmt.Sprintf("quota requests.cpu=%s: the native Pod (formula %s) refused: %v", hard, nat.cpu, err)}, nil
}

// CheckLimits judges sidecar.resources.limits-qos on every kubelet: with
// every container's limits equal to its requests, the API gives the Pod
// the QoS class computed here (Guaranteed), and the kubelet puts it in
// that class's cgroup with the Pod's CPU quota and memory limit set to
// the formula's effective limits - native sidecar and regular helper.
func (s *Sidecars) CheckLimits(ctx context.Context) promise.Verdict {
	// Each kubelet's Pods one after the other (two Guaranteed Pods of
	// 1.1 CPUs together might not fit a node beside the other checks'),
	// the kubelets at once: run one after the other, this check's four
	// Pods were the sidecar phase's last 140 s.
	return s.onEachAtOnce(ctx, "sidecar.resources.limits-qos", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		var ev []string
		for _, c := range sizedCases {
			line, err := s.limits(ctx, k, ns, c)
			if err != nil {
				return ev, fmt.Errorf("%s helper: %w", c.name, err)
			}
			ev = append(ev, line)
		}
		return ev, nil
	})
}

func (s *Sidecars) limits(ctx context.Context, k Kubelet, ns string, c sizedCase) (string, error) {
	pod := s.sizedPod(ns, k.Name, c, true)
	wantQoS := qosClass(pod)
	wantCPU, wantMem := effectiveLimit(pod, corev1.ResourceCPU), effectiveLimit(pod, corev1.ResourceMemory)
	if wantCPU.Cmp(resource.MustParse(c.cpu)) != 0 || wantMem.Cmp(resource.MustParse(c.memory)) != 0 {
		return "", fmt.Errorf("the formula, computed here, gives limits cpu=%s memory=%s, the case says %s, %s", wantCPU.String(), wantMem.String(), c.cpu, c.memory)
	}
	if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	p, err := s.waitPod(ctx, "certify/sidecar-pod", ns, c.name, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return "", err
	}
	line, err := judgeLimits(c, p, wantQoS, wantCPU, wantMem, func() (cgroupLimits, error) { return podCgroup(ctx, k.Node, string(p.UID)) })
	if err != nil {
		return "", err
	}
	if err := s.removePod(ctx, ns, c.name); err != nil {
		return "", err
	}
	return line, nil
}

// judgeLimits judges sidecar.resources.limits-qos on c's Pod as the API
// runs it (p) and the kubelet's cgroup of it (read once its class held):
// the class and the limits computed here.
func judgeLimits(c sizedCase, p *corev1.Pod, wantQoS corev1.PodQOSClass, wantCPU, wantMem resource.Quantity, read func() (cgroupLimits, error)) (string, error) {
	if p.Status.QOSClass != wantQoS {
		return "", fmt.Errorf("QoS class %s, computed %s", p.Status.QOSClass, wantQoS)
	}
	cg, err := read()
	if err != nil {
		return "", err
	}
	switch {
	case cg.qos != wantQoS:
		return "", fmt.Errorf("the kubelet put the Pod in the %s cgroup %s, its class is %s", cg.qos, cg.cpuPath, wantQoS)
	case cg.cpu == nil || cg.cpu.Cmp(wantCPU) != 0:
		return "", fmt.Errorf("the Pod's cgroup %s has CPU quota %s, the formula gives %s", cg.cpuPath, cg.cpuText, wantCPU.String())
	case cg.memory == nil || cg.memory.Cmp(wantMem) != 0:
		return "", fmt.Errorf("the Pod's cgroup %s has memory limit %s, the formula gives %s", cg.memPath, cg.memText, wantMem.String())
	}
	return fmt.Sprintf("%s helper: QoS %s (computed %s); the kubelet's Pod cgroup %s: CPU quota %s (%s), memory limit %s (%s) - the formula's %s, %s",
		c.name, p.Status.QOSClass, wantQoS, cg.cpuPath, cg.cpuText, cg.cpu.String(), cg.memText, cg.memory.String(), c.cpu, c.memory), nil
}

// removePod deletes a case's Pod and waits until it is gone, so the next
// case's requests are charged and scheduled alone.
func (s *Sidecars) removePod(ctx context.Context, ns, name string) error {
	if err := s.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return s.waitGone(ctx, ns, name, 2*time.Minute)
}

// effective computes a Pod's effective request of one resource the way
// KEP-753 defines it: the larger of the app containers plus every sidecar,
// and each plain init container plus the sidecars started before it.
func effective(pod *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	return formula(pod, func(c corev1.Container) resource.Quantity { return c.Resources.Requests[name] })
}

// effectiveLimit is the same formula over limits.
func effectiveLimit(pod *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	return formula(pod, func(c corev1.Container) resource.Quantity { return c.Resources.Limits[name] })
}

func formula(pod *corev1.Pod, of func(corev1.Container) resource.Quantity) resource.Quantity {
	var sidecars, peak resource.Quantity
	for _, c := range pod.Spec.InitContainers {
		r := of(c)
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
		apps.Add(of(c))
	}
	if apps.Cmp(peak) > 0 {
		peak = apps
	}
	return peak
}

// qosClass is the class the API must give pod, by the rules of the Pod QoS
// documentation: Guaranteed when every container (init containers and
// sidecars included) has CPU and memory limits and requests equal to
// them, BestEffort when none has any request or limit, else Burstable.
func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	guaranteed, none := true, true
	for _, c := range all {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq || hasLim {
				none = false
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case none:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
