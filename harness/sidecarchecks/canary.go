package sidecarchecks

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// The canary: canaryPerNode Pods of each template on every kubelet, the
// legacy template's (an app, a log agent shipping its log and a proxy in
// front of it, all regular containers) and the native one's (the helpers
// made native sidecars by the migration's own NativeSpec), created at
// once, then asked through their proxies for canaryServe, measured and
// deleted; and a Job of each template on every kubelet, its app done
// after canaryJobExit.
const (
	canaryPerNode = 2
	canaryServe   = 10 * time.Second
	canaryEvery   = 250 * time.Millisecond
	canaryJobExit = 3 * time.Second
	// canaryMinRequests is each template's floor of requests: enough to
	// tell a 1% error share from none.
	canaryMinRequests = 100
)

// canaryHelpers are the canary's helpers, in the order they start as
// native sidecars.
var canaryHelpers = []string{"log-agent", "proxy"}

// The templates, in the order of CanarySeen.Templates.
const (
	legacyTemplate = iota
	nativeTemplate
)

var templateNames = [2]string{"legacy", "native"}

// CanarySeen is what the canary measured of each template.
type CanarySeen struct {
	Nodes     []string
	Pods      int
	Templates [2]TemplateSeen
	// ReadinessLooks are the looks readiness lost after Ready rests on.
	ReadinessLooks Looks
}

// TemplateSeen is one template's figures.
type TemplateSeen struct {
	// Ready is each Pod's time from its create to Ready, as polled;
	// NeverReady counts those not Ready within the budget.
	Ready      []time.Duration
	NeverReady int
	// ReadinessFailures are the kubelets' Unhealthy events of its Pods
	// (readiness probe failures, before a first Ready too).
	ReadinessFailures int32
	// ReadinessLost counts the times a Pod that was Ready was seen not
	// Ready while it was asked.
	ReadinessLost int32
	// Restarts counts its containers' restarts (sidecar.Restarts);
	// RuntimeRestarts those of them that were a start the runtime failed,
	// in its own words (restarts.RuntimeCause): a container that ended
	// once, that ending's.
	Restarts, RuntimeRestarts int32
	Requests, Errors          int
	// Written and Lost are the app's lines and those its log agent never
	// shipped, over the template's Pods deleted.
	Written, Lost int
	// MemoryPeak and CPU are each Pod's, from its cgroup just before its
	// deletion.
	MemoryPeak []int64
	CPU        []time.Duration
	// Jobs is each Job's time from its start to its completion, to the
	// second as the API records it; JobsUnfinished those not complete.
	Jobs           []time.Duration
	JobsUnfinished int
}

// CheckCanary judges sidecar.canary.compared and keeps the comparison for
// the run's results (Compared).
func (s *Sidecars) CheckCanary(ctx context.Context) promise.Verdict {
	const id = "sidecar.canary.compared"
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return failed(id, "%v", err)
	}
	defer done()
	seen, err := s.runCanary(ctx, ns)
	if err != nil {
		return failed(id, "%v", err)
	}
	c := CompareCanary(seen)
	s.canary.Store(&c)
	return JudgeCanary(seen, c)
}

// Compared is the canary's comparison, nil until CheckCanary ran.
func (s *Sidecars) Compared() *report.Canary { return s.canary.Load() }

// runCanary creates both templates' Pods and Jobs at once in ns, and
// measures them.
func (s *Sidecars) runCanary(ctx context.Context, ns string) (CanarySeen, error) {
	seen := CanarySeen{Pods: canaryPerNode * len(s.Kubelets)}
	created := map[string]time.Time{}
	on := map[string]cluster.Node{}
	var pods [2][]string
	for _, k := range s.Kubelets {
		seen.Nodes = append(seen.Nodes, k.String())
		for i := range canaryPerNode {
			for t := range templateNames {
				b := podBuilder{image: s.image, ns: ns, name: fmt.Sprintf("%s-%s-%d", templateNames[t], k.Name, i), node: k.Name}
				pod, err := canaryPod(b, t == nativeTemplate)
				if err != nil {
					return seen, err
				}
				created[b.name], on[b.name] = time.Now(), k.Node
				if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					return seen, err
				}
				pods[t] = append(pods[t], b.name)
			}
		}
		for t := range templateNames {
			job, err := canaryJob(podBuilder{image: s.image, ns: ns, name: fmt.Sprintf("job-%s-%s", templateNames[t], k.Name), node: k.Name}, t == nativeTemplate)
			if err != nil {
				return seen, err
			}
			if _, err := s.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				return seen, err
			}
		}
	}
	ready, err := s.canaryReady(ctx, ns, created)
	if err != nil {
		return seen, err
	}
	for t := range templateNames {
		for _, name := range pods[t] {
			if d, ok := ready[name]; ok {
				seen.Templates[t].Ready = append(seen.Templates[t].Ready, d)
			} else {
				seen.Templates[t].NeverReady++
			}
		}
	}
	if err := s.canaryServe(ctx, ns, pods, &seen); err != nil {
		return seen, err
	}
	for t := range templateNames {
		if err := s.canaryUsage(ctx, ns, pods[t], on, &seen.Templates[t]); err != nil {
			return seen, err
		}
	}
	if err := s.canaryJobs(ctx, ns, &seen); err != nil {
		return seen, err
	}
	return seen, s.canaryDelete(ctx, ns, pods, on, &seen)
}

// canaryPod is the canary's Pod of b, of the native template or the
// legacy one.
func canaryPod(b podBuilder, native bool) (*corev1.Pod, error) {
	app := b.container("app", "app", "-log", "/shared/app.log", "-rate", "50", "-serve", guardedAppAddr)
	proxy := b.container("proxy", "proxy", "-load-after", "0s", "-upstream", "http://"+guardedAppAddr)
	proxy.ReadinessProbe = &corev1.Probe{ProbeHandler: proxyGet("/ready"), InitialDelaySeconds: 1, PeriodSeconds: 1}
	pod := b.pod(nil, []corev1.Container{app, shipper(b), proxy})
	return asTemplate(pod, native)
}

// shipper is the canary's log agent: it ships the app's log to the
// events directory and reports what it read, shipped and lost.
func shipper(b podBuilder) corev1.Container {
	return b.container("log-agent", "log-agent", "-source", "/shared/app.log", "-sink", "/events/shipped",
		"-interval", "1s", "-per-line", "1ms", "-budget", "10s", "-report", "/events/agent.json")
}

// asTemplate labels pod with its template and, native, moves its helpers
// to native sidecars as the migration does.
func asTemplate(pod *corev1.Pod, native bool) (*corev1.Pod, error) {
	pod.Labels["template"] = templateNames[legacyTemplate]
	if !native {
		return pod, nil
	}
	pod.Labels["template"] = templateNames[nativeTemplate]
	helpers := slices.DeleteFunc(slices.Clone(canaryHelpers), func(h string) bool {
		return !slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == h })
	})
	spec, err := sidecar.NativeSpec(pod.Spec, helpers)
	pod.Spec = spec
	return pod, err
}

// canaryJob is a Job of b's app, done after canaryJobExit, with its log
// agent; native, a native sidecar.
func canaryJob(b podBuilder, native bool) (*batchv1.Job, error) {
	app := b.container("app", "app", "-log", "/shared/app.log", "-rate", "50", "-exit-after", canaryJobExit.String())
	pod, err := asTemplate(b.pod(nil, []corev1.Container{app, shipper(b)}), native)
	if err != nil {
		return nil, err
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	none := int32(0)
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns, Labels: map[string]string{"template": pod.Labels["template"]}},
		Spec: batchv1.JobSpec{BackoffLimit: &none, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}, nil
}

// canaryReady polls the canary's Pods every 200 ms until each is Ready,
// within the sidecar Pods' budget, and returns each one's time from its
// create to the first poll that saw it Ready. A Pod never Ready is left
// out, for the floor to count.
func (s *Sidecars) canaryReady(ctx context.Context, ns string, created map[string]time.Time) (map[string]time.Duration, error) {
	ready := map[string]time.Duration{}
	budget, err := wait.Named("certify/sidecar-pod")
	if err != nil {
		return nil, err
	}
	budget.Interval = 200 * time.Millisecond
	err = wait.Within(ctx, budget, "the canary's Pods Ready", func(ctx context.Context) (bool, string, error) {
		list, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "template"})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range list.Items {
			if _, ok := ready[p.Name]; !ok && !created[p.Name].IsZero() && podReady(&p) {
				ready[p.Name] = time.Since(created[p.Name])
			}
		}
		return len(ready) == len(created), fmt.Sprintf("%d of %d Ready", len(ready), len(created)), nil
	})
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	return ready, nil
}

// canaryUsage reads each of a template's Pods' restarts and readiness
// failures, and its memory peak and CPU time from its cgroup.
func (s *Sidecars) canaryUsage(ctx context.Context, ns string, names []string, on map[string]cluster.Node, seen *TemplateSeen) error {
	var pods []corev1.Pod
	for _, name := range names {
		p, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods = append(pods, *p)
		peak, cpu, err := podUsage(ctx, on[name], string(p.UID))
		if err != nil {
			return err
		}
		seen.MemoryPeak, seen.CPU = append(seen.MemoryPeak, peak), append(seen.CPU, cpu)
	}
	seen.Restarts, seen.RuntimeRestarts = sidecar.Restarts(pods), runtimeRestarts(pods)
	var err error
	seen.ReadinessFailures, err = sidecar.ReadinessFailures(ctx, s.cs, pods)
	return err
}

// runtimeRestarts counts, of pods' restarts, those whose ending names a
// cause in the runtime's own words (restarts.RuntimeCause): only of a
// container that ended once, as its status keeps only its last ending.
func runtimeRestarts(pods []corev1.Pod) int32 {
	var n int32
	for _, p := range pods {
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if count, last := sidecar.ContainerRestarts(st); count == 1 && last != nil && restarts.RuntimeCause(last.Reason, last.Message) != "" {
				n++
			}
		}
	}
	return n
}
