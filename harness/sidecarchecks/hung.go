package sidecarchecks

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// The hung helper's probes, and the bounds they set. Readiness asks
// every second and gives up on a probe after one: three failures in a
// row, at most 3 x (1 s + 1 s) after the hang, take the Pod out of
// service. Liveness asks every 2 s: three failures, at most
// 3 x (2 s + 1 s), and the kubelet kills the sidecar, which stops within
// its 2 s shutdown, and starts it again at once (a container's first
// restart is not backed off); it answers /ready as it starts, and the
// next readiness probe, within 1 s, finds it. hungSlack is added once
// for the runtime's restart of the container and once for what follows
// a probe's result - the kubelet's status write, the EndpointSlice
// controller's update (its batch period is 0 by default) and this
// check's 200 ms reading - on a two-core host running the other sidecar
// checks beside it.
const (
	hungAfter = 10 * time.Second
	hungSlack = 9 * time.Second
	// outOfService bounds the hang to the Pod leaving the Service's ready
	// endpoints; backInService the hang to its return, restarted.
	outOfService  = 3*(time.Second+time.Second) + hungSlack
	backInService = 3*(2*time.Second+time.Second) + 2*time.Second + time.Second + 2*hungSlack
)

// CheckHungHelper judges sidecar.hung.out-of-service on every kubelet at
// once: a native sidecar that hangs - its process alive, its port open
// and silent - takes its Pod out of its Service's ready endpoints by its
// readiness probe within outOfService, the app runs on untouched, and
// its liveness probe restarts the sidecar alone, the Pod back in service
// within backInService of the hang. The hang's time is the sidecar's own
// record of it.
func (s *Sidecars) CheckHungHelper(ctx context.Context) promise.Verdict {
	return s.onEachAtOnce(ctx, "sidecar.hung.out-of-service", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		b := podBuilder{image: s.image, ns: ns, name: "hung", node: k.Name}
		proxy := native(b.container(CrashingSidecar, "proxy", "-load-after", "0s", "-hang-after", hungAfter.String(), "-hang-marker", "/shared/hung"))
		proxy.ReadinessProbe = &corev1.Probe{ProbeHandler: proxyGet("/ready"), PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 3}
		proxy.LivenessProbe = &corev1.Probe{ProbeHandler: proxyGet("/healthz"), PeriodSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3}
		pod := b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("app", "app")})
		if err := s.service(ctx, ns, b.name, pod.Labels); err != nil {
			return nil, err
		}
		if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		seen, err := s.inAndOut(ctx, ns, b.name)
		if err != nil {
			return nil, err
		}
		ev, err := events(ctx, k.Node, ns, b.name)
		if err != nil {
			return nil, err
		}
		return judgeHung(seen, ev)
	})
}

// HungSeen is what CheckHungHelper saw of its Pod: when it was first
// seen a ready endpoint (In), when it left the ready endpoints (Out),
// when it was back, its sidecar restarted (Back), the Pod then, and the
// app's start as first seen.
type HungSeen struct {
	In, Out, Back time.Time
	Pod           *corev1.Pod
	AppStarted    metav1.Time
}

// inAndOut follows Pod ns/name in its Service's EndpointSlices: in
// service, out, and in again with its sidecar restarted.
func (s *Sidecars) inAndOut(ctx context.Context, ns, name string) (HungSeen, error) {
	var seen HungSeen
	budget := wait.Budget{Timeout: 2 * time.Minute, Interval: 200 * time.Millisecond}
	step := func(what string, done func(p *corev1.Pod, ready bool) bool) (time.Time, error) {
		err := wait.Within(ctx, budget, fmt.Sprintf("Pod %s/%s %s", ns, name, what), func(ctx context.Context) (bool, string, error) {
			p, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ready, err := s.readyEndpoint(ctx, ns, name, p.Status.PodIP)
			if err != nil {
				return false, err.Error(), nil
			}
			seen.Pod = p
			return done(p, ready), fmt.Sprintf("ready endpoint %v, %s", ready, containerStates(p)), nil
		})
		return time.Now(), err
	}
	var err error
	if seen.In, err = step("a ready endpoint of its Service, its app running", inService); err != nil {
		return seen, err
	}
	seen.AppStarted = seen.Pod.Status.ContainerStatuses[0].State.Running.StartedAt
	if seen.Out, err = step("out of its Service's ready endpoints", func(p *corev1.Pod, ready bool) bool { return !ready }); err != nil {
		return seen, err
	}
	seen.Back, err = step("back in service, its sidecar restarted", func(p *corev1.Pod, ready bool) bool {
		st := p.Status.InitContainerStatuses
		return ready && len(st) == 1 && st[0].RestartCount >= 1
	})
	return seen, err
}

// inService says the Pod is in service: a ready endpoint, and its app
// seen running in the Pod as read. The Pod is read before its endpoints,
// so a Pod that turned ready between the two reads shows its app not yet
// started: its start is taken from a read that shows it (a zero start
// failed a soak run: "it started at 00:00:00").
func inService(p *corev1.Pod, ready bool) bool { return ready && appRunning(p) }

// readyEndpoint says whether ip is a ready endpoint of Service ns/svc.
func (s *Sidecars) readyEndpoint(ctx context.Context, ns, svc, ip string) (bool, error) {
	eps, err := s.endpointSlices(ctx, ns, svc)
	if err != nil || ip == "" {
		return false, err
	}
	return readyAddresses(eps)[ip], nil
}

// judgeHung judges sidecar.hung.out-of-service on what CheckHungHelper
// saw and what the Pod's fixtures recorded: the sidecar hung after the
// Pod was seen in service, the Pod left the ready endpoints within
// outOfService of the hang and was back within backInService, the app
// never restarted, and the sidecar ran twice (hung, then restarted).
func judgeHung(seen HungSeen, ev []fixtures.Event) ([]string, error) {
	hung, err := firstEvent(ev, CrashingSidecar, "hang")
	if err != nil {
		return nil, err
	}
	if len(seen.Pod.Status.ContainerStatuses) != 1 || len(seen.Pod.Status.InitContainerStatuses) != 1 {
		return nil, fmt.Errorf("the Pod's statuses are not one sidecar and one app: %s", containerStates(seen.Pod))
	}
	app := seen.Pod.Status.ContainerStatuses[0]
	out, back := seen.Out.Sub(hung), seen.Back.Sub(hung)
	switch {
	case hung.Before(seen.In):
		return nil, unjudged("the sidecar hung at %s, before its Pod was first seen in service at %s: the hang's bound cannot be judged",
			hung.UTC().Format("15:04:05.000"), seen.In.UTC().Format("15:04:05.000"))
	case out < 0:
		return nil, unjudged("the Pod left its Service's ready endpoints at %s, before its sidecar hung at %s: a flap, not the hang, was timed",
			seen.Out.UTC().Format("15:04:05.000"), hung.UTC().Format("15:04:05.000"))
	case out > outOfService:
		return nil, fmt.Errorf("the Pod left its Service's ready endpoints %s after its sidecar hung, over the readiness probe's bound %s", out.Round(100*time.Millisecond), outOfService)
	case back > backInService:
		return nil, fmt.Errorf("the Pod was back in service %s after its sidecar hung, over the liveness probe's bound %s", back.Round(100*time.Millisecond), backInService)
	case app.RestartCount != 0 || app.State.Running == nil || !app.State.Running.StartedAt.Equal(&seen.AppStarted):
		return nil, fmt.Errorf("the app did not keep running through the sidecar's hang: %s (it started at %s)", containerStates(seen.Pod), seen.AppStarted.UTC().Format("15:04:05"))
	}
	starts := 0
	for _, e := range ev {
		if e.Who == CrashingSidecar && e.What == "start" {
			starts++
		}
	}
	if starts != 2 {
		return nil, fmt.Errorf("the sidecar started %d times, want 2 (hung, then restarted by its liveness probe): %s", starts, eventLines(ev))
	}
	return []string{fmt.Sprintf("the sidecar hung at %s; out of the Service's ready endpoints %s later (bound %s), back %s later, restarted by its liveness probe (bound %s); restarts: sidecar %d, app 0",
		hung.UTC().Format("15:04:05.000"), out.Round(100*time.Millisecond), outOfService, back.Round(100*time.Millisecond), backInService,
		seen.Pod.Status.InitContainerStatuses[0].RestartCount)}, nil
}
