package sidecarchecks

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// CheckStartOrder judges sidecar.start.order on every kubelet: the app
// starts only after its native sidecar has started and, when a startup
// probe gates the sidecar, after it is ready.
func (s *Sidecars) CheckStartOrder(ctx context.Context) promise.Verdict {
	return s.onEach(ctx, "sidecar.start.order", func(ctx context.Context, k Kubelet) ([]string, error) {
		var ev []string
		for _, probe := range []bool{true, false} {
			line, err := s.startOrder(ctx, k, probe)
			if err != nil {
				return ev, fmt.Errorf("startup probe %v: %w", probe, err)
			}
			ev = append(ev, line)
		}
		return ev, nil
	})
}

func (s *Sidecars) startOrder(ctx context.Context, k Kubelet, probe bool) (string, error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return "", err
	}
	defer done()
	b := podBuilder{image: s.image, ns: ns, name: "order", node: k.Name}
	proxy := native(b.container("proxy", "proxy", "-load-after", "3s"))
	if probe {
		proxy.StartupProbe = readyProbe()
	}
	app := b.container("app", "app", "-ready-url", "http://127.0.0.1:8080/ready")
	if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, b.pod([]corev1.Container{proxy}, []corev1.Container{app}), metav1.CreateOptions{}); err != nil {
		return "", err
	}
	pod, err := s.waitPod(ctx, "certify/sidecar-pod", ns, b.name, "the app running", appRunning)
	if err != nil {
		return "", err
	}
	var ev []fixtures.Event
	if err := wait.For(ctx, "certify/sidecar-event", "the app's start event", func(ctx context.Context) (bool, string, error) {
		ev, err = events(ctx, k.Node, ns, b.name)
		_, ok := fixtures.First(ev, "app", "start")
		return ok, eventLines(ev), err
	}); err != nil {
		return "", err
	}
	return judgeStartOrder(ev, pod, probe)
}

// judgeStartOrder judges sidecar.start.order on what one Pod's fixtures
// recorded (ev) and its statuses once the app ran: the app started after
// the sidecar started and, with a startup probe (probe), after it was
// ready. It says what it saw, or how the order broke.
func judgeStartOrder(ev []fixtures.Event, pod *corev1.Pod, probe bool) (string, error) {
	proxyStart, err := firstEvent(ev, "proxy", "start")
	if err != nil {
		return "", err
	}
	appStart, _ := fixtures.First(ev, "app", "start")
	if !appStart.After(proxyStart) {
		return "", fmt.Errorf("the app started before the sidecar: %s", eventLines(ev))
	}
	// Container statuses say the same, to the second.
	if pod.Status.ContainerStatuses[0].State.Running.StartedAt.Before(&pod.Status.InitContainerStatuses[0].State.Running.StartedAt) {
		return "", fmt.Errorf("the statuses say the app started before the sidecar: %s", containerStates(pod))
	}
	if !probe {
		return fmt.Sprintf("no startup probe: the app started %s after the sidecar started (%s)",
			appStart.Sub(proxyStart).Round(time.Millisecond), ev[len(ev)-1].What), nil
	}
	ready, err := firstEvent(ev, "proxy", "ready")
	if err != nil {
		return "", err
	}
	if !appStart.After(ready) {
		return "", fmt.Errorf("the app started before the sidecar was ready: %s", eventLines(ev))
	}
	if _, err := firstEvent(ev, "app", "start proxy-ready=true"); err != nil {
		return "", err
	}
	return fmt.Sprintf("startup probe: the sidecar ready %s after it started; the app started %s after it was ready",
		ready.Sub(proxyStart).Round(time.Millisecond), appStart.Sub(ready).Round(time.Millisecond)), nil
}

// CrashingSidecar is the container the crash and migration checks crash
// on purpose: a run that judges restarts is told it is meant.
const CrashingSidecar = "proxy"

// CrashingAgent is the optional log agent the fail-open check crashes on
// purpose, meant as CrashingSidecar is.
const CrashingAgent = "optional-agent"

// CheckCrashAlone judges sidecar.crash.restarts-alone on every kubelet: a
// sidecar that exits with an error once is restarted, and nothing else.
func (s *Sidecars) CheckCrashAlone(ctx context.Context) promise.Verdict {
	return s.onEach(ctx, "sidecar.crash.restarts-alone", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		b := podBuilder{image: s.image, ns: ns, name: "crash", node: k.Name}
		proxy := native(b.container(CrashingSidecar, "proxy", "-load-after", "0s", "-crash-after", "5s", "-crash-marker", "/shared/crashed"))
		// Restarted, not restarted once: a start the container runtime
		// fails (runc's "unable to freeze" on a loaded cgroup v1 host) is
		// counted as a restart too. How often the sidecar ran is judged on
		// what it recorded.
		after, appStarted, err := s.appThenSidecar(ctx, b, proxy, "the sidecar restarted and running", func(st corev1.ContainerStatus) bool {
			return st.RestartCount >= 1 && st.State.Running != nil
		})
		if err != nil {
			return nil, err
		}
		return judgeCrashAlone(after, appStarted, func() ([]fixtures.Event, error) { return events(ctx, k.Node, ns, b.name) })
	})
}

// judgeCrashAlone judges sidecar.crash.restarts-alone on the Pod once its
// sidecar restarted (after), the app having started at appStarted, and
// on what its fixtures recorded (read once the app is seen unharmed):
// the sidecar crashed and started again, the app ran on.
func judgeCrashAlone(after *corev1.Pod, appStarted metav1.Time, read func() ([]fixtures.Event, error)) ([]string, error) {
	if err := appUntouched(after, appStarted, "the sidecar's crash"); err != nil {
		return nil, err
	}
	app := after.Status.ContainerStatuses[0]
	ev, err := read()
	if err != nil {
		return nil, err
	}
	var starts []time.Time
	for _, e := range ev {
		if e.Who == "proxy" && e.What == "start" {
			starts = append(starts, e.At)
		}
	}
	crashed, err := firstEvent(ev, "proxy", "crash")
	if err != nil {
		return nil, err
	}
	// A sidecar that crashed before the app started (a loaded node slow to
	// start the app) shows nothing of the app running through it.
	if appStart, err := firstEvent(ev, "app", "start"); err != nil || !crashed.After(appStart) {
		return nil, unjudged("the sidecar crashed before the app had started, nothing of the app ran through it: %s", eventLines(ev))
	}
	if len(starts) != 2 {
		return nil, fmt.Errorf("the sidecar started %d times, want 2 (started, crashed, started again): %s", len(starts), eventLines(ev))
	}
	sidecar := after.Status.InitContainerStatuses[0]
	line := fmt.Sprintf("the sidecar crashed at %s and was restarted alone, running again %s later (restarts: sidecar %d, app %d)",
		crashed.UTC().Format("15:04:05.000"), starts[1].Sub(crashed).Round(100*time.Millisecond), sidecar.RestartCount, app.RestartCount)
	if sidecar.RestartCount > 1 {
		line += fmt.Sprintf("; it ran twice, so %d of the restarts failed to start it: %s", sidecar.RestartCount-1, lastTermination(sidecar))
	}
	return []string{line}, nil
}

// appThenSidecar makes b's Pod of the native sidecar and an app, waits for
// the app running, then for the sidecar's status to be what (done); it
// returns the Pod then and when the app started.
func (s *Sidecars) appThenSidecar(ctx context.Context, b podBuilder, sidecar corev1.Container, what string, done func(corev1.ContainerStatus) bool) (*corev1.Pod, metav1.Time, error) {
	if _, err := s.cs.CoreV1().Pods(b.ns).Create(ctx, b.pod([]corev1.Container{sidecar}, []corev1.Container{b.container("app", "app")}), metav1.CreateOptions{}); err != nil {
		return nil, metav1.Time{}, err
	}
	before, err := s.waitPod(ctx, "certify/sidecar-pod", b.ns, b.name, "the app running", appRunning)
	if err != nil {
		return nil, metav1.Time{}, err
	}
	appStarted := before.Status.ContainerStatuses[0].State.Running.StartedAt
	after, err := s.waitPod(ctx, "certify/sidecar-pod", b.ns, b.name, what, func(p *corev1.Pod) bool {
		st := p.Status.InitContainerStatuses
		return len(st) == 1 && done(st[0])
	})
	return after, appStarted, err
}

// appUntouched says whether the Pod's app ran on through what its sidecar
// met: never restarted, running since appStarted.
func appUntouched(p *corev1.Pod, appStarted metav1.Time, through string) error {
	app := p.Status.ContainerStatuses[0]
	if app.RestartCount != 0 || app.State.Running == nil || !app.State.Running.StartedAt.Equal(&appStarted) {
		return fmt.Errorf("the app did not keep running through %s: %s (it started at %s)", through, containerStates(p), appStarted.UTC().Format("15:04:05"))
	}
	return nil
}

// lastTermination says how a container's previous run ended.
func lastTermination(st corev1.ContainerStatus) string {
	t := st.LastTerminationState.Terminated
	if t == nil {
		return "its last termination is not recorded"
	}
	return fmt.Sprintf("the last ended %s (exit %d) %q", t.Reason, t.ExitCode, t.Message)
}

// CheckReadinessGates judges sidecar.readiness.gates: a sidecar that never
// turns ready keeps its Pod out of the Service's ready endpoints and halts
// the Deployment's rollout while the old Pod serves.
func (s *Sidecars) CheckReadinessGates(ctx context.Context) promise.Verdict {
	ev, err := s.readinessGates(ctx)
	return verdict("sidecar.readiness.gates", ev, err)
}

func (s *Sidecars) readinessGates(ctx context.Context) ([]string, error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	b := podBuilder{image: s.image, ns: ns, name: "web"}
	proxy := native(b.container("proxy", "proxy", "-load-after", "2s"))
	proxy.ReadinessProbe = readyProbe()
	proxy.ReadinessProbe.FailureThreshold = 1
	pod := b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("app", "app")})
	one, zero, deadline, replicas := intstr.FromInt32(1), intstr.FromInt32(0), int32(20), int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, ProgressDeadlineSeconds: &deadline,
			Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
	deployments := s.cs.AppsV1().Deployments(ns)
	if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := s.service(ctx, ns, "web", pod.Labels); err != nil {
		return nil, err
	}
	if err := s.waitDeployment(ctx, ns, "web", "available", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 }); err != nil {
		return nil, err
	}
	// The next template's sidecar never loads its configuration.
	cur, err := deployments.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	args := cur.Spec.Template.Spec.InitContainers[0].Args
	cur.Spec.Template.Spec.InitContainers[0].Args = append(args[:len(args)-2:len(args)-2], "-load-after", "1h")
	if _, err := deployments.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	if err := s.waitDeployment(ctx, ns, "web", "its rollout halted (ProgressDeadlineExceeded)", func(d *appsv1.Deployment) bool {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
				return true
			}
		}
		return false
	}); err != nil {
		return nil, err
	}
	halted, err := deployments.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return judgeGates(halted, func() ([]corev1.Pod, error) {
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return nil, err
		}
		return pods.Items, nil
	}, func() ([]discoveryv1.EndpointSlice, error) { return s.endpointSlices(ctx, ns, "web") })
}

// judgeGates judges sidecar.readiness.gates once the Deployment's rollout
// halted: the old Pod still available and a ready endpoint, the new one,
// whose sidecar never turns ready, not (list reads the Deployment's Pods,
// slices the Service's EndpointSlices).
func judgeGates(halted *appsv1.Deployment, list func() ([]corev1.Pod, error), slices func() ([]discoveryv1.EndpointSlice, error)) ([]string, error) {
	if halted.Status.AvailableReplicas != 1 {
		return nil, fmt.Errorf("the halted rollout left %d available, want the old Pod serving", halted.Status.AvailableReplicas)
	}
	pods, err := list()
	if err != nil {
		return nil, err
	}
	if len(pods) != 2 {
		return nil, fmt.Errorf("%d Pods, want the old one and one of the new template", len(pods))
	}
	ready := map[string]bool{}
	var newPod corev1.Pod
	for _, p := range pods {
		ready[p.Status.PodIP] = podReady(&p)
		if !podReady(&p) {
			newPod = p
		}
	}
	if newPod.Name == "" {
		return nil, fmt.Errorf("no Pod of the new template is unready: %d Pods ready", len(pods))
	}
	eps, err := slices()
	if err != nil {
		return nil, err
	}
	serving := readyAddresses(eps)
	if serving[newPod.Status.PodIP] {
		return nil, fmt.Errorf("the new Pod %s (%s) is a ready endpoint though its sidecar is not ready", newPod.Name, newPod.Status.PodIP)
	}
	for ip, r := range ready {
		if r && !serving[ip] {
			return nil, fmt.Errorf("the old Pod (%s) is not a ready endpoint any more", ip)
		}
	}
	return []string{fmt.Sprintf("a sidecar that never turns ready: Deployment halted (ProgressDeadlineExceeded, %d available); new Pod %s not a ready endpoint (%s)",
		halted.Status.AvailableReplicas, newPod.Name, containerStates(&newPod))}, nil
}

// waitDeployment waits until the Deployment satisfies cond.
func (s *Sidecars) waitDeployment(ctx context.Context, ns, name, what string, cond func(*appsv1.Deployment) bool) error {
	return wait.For(ctx, "certify/sidecar-deployment", fmt.Sprintf("Deployment %s/%s %s", ns, name, what), func(ctx context.Context) (bool, string, error) {
		d, err := s.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var conds []string
		for _, c := range d.Status.Conditions {
			conds = append(conds, string(c.Type)+"="+c.Reason)
		}
		return cond(d), fmt.Sprintf("%d updated, %d available of %d; %s", d.Status.UpdatedReplicas, d.Status.AvailableReplicas, d.Status.Replicas, strings.Join(conds, ", ")), nil
	})
}
