package sidecarchecks

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// legacyJobWatch is how long, after its native twin completed, a Job
// whose helper is a regular container is watched not completing.
const legacyJobWatch = 10 * time.Second

// CheckJobs judges sidecar.job.completes on every kubelet: a Job whose
// log agent is a native sidecar completes once its app (exiting after
// 3 s) has; the same Job with the agent as a regular container does not
// - the reason to migrate - which is shown, not judged.
func (s *Sidecars) CheckJobs(ctx context.Context) certify.Verdict {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return failed("sidecar.job.completes", "%v", err)
	}
	defer done()
	jobs := s.cs.BatchV1().Jobs(ns)
	index := map[string]int{}
	for i, k := range s.Kubelets {
		index[k.Name] = i
		for _, withSidecar := range []bool{true, false} {
			if _, err := jobs.Create(ctx, s.job(ns, jobName(i, withSidecar), k.Name, withSidecar), metav1.CreateOptions{}); err != nil {
				return failed("sidecar.job.completes", "%v", err)
			}
		}
	}
	return s.onEach(ctx, "sidecar.job.completes", func(ctx context.Context, k Kubelet) ([]string, error) {
		i := index[k.Name]
		name := jobName(i, true)
		var job *batchv1.Job
		err := wait.For(ctx, "certify/sidecar-job", fmt.Sprintf("the Job %s on %s to complete", name, k), func(ctx context.Context) (bool, string, error) {
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			job = j
			state := s.jobPods(ctx, ns, name)
			if j.Status.Failed > 0 {
				return false, "", fmt.Errorf("the Job %s failed: %s", name, state)
			}
			return j.Status.CompletionTime != nil, state, nil
		})
		if err != nil {
			return nil, err
		}
		took := job.Status.CompletionTime.Sub(job.CreationTimestamp.Time)
		legacy := jobName(i, false)
		stillRunning := wait.Within(ctx, wait.Budget{Timeout: legacyJobWatch, Interval: 2 * time.Second}, "the Job "+legacy+" with a regular helper to complete",
			func(ctx context.Context) (bool, string, error) {
				j, err := jobs.Get(ctx, legacy, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				return j.Status.CompletionTime != nil, "", nil
			}) != nil
		return []string{fmt.Sprintf("the Job with a native sidecar completed %s after creation; the Job with the helper as a regular container, %s after creation: %s (%s)",
			took.Round(time.Second), (took + legacyJobWatch).Round(time.Second), map[bool]string{true: "still running", false: "completed"}[stillRunning], s.jobPods(ctx, ns, legacy))}, nil
	})
}

func jobName(i int, withSidecar bool) string {
	if withSidecar {
		return fmt.Sprintf("native-%d", i)
	}
	return fmt.Sprintf("legacy-%d", i)
}

// job is a Job on node whose app exits after 3 s and whose log agent is a
// native sidecar, or a regular container beside the app.
func (s *Sidecars) job(ns, name, node string, withSidecar bool) *batchv1.Job {
	b := podBuilder{image: s.image, ns: ns, name: name, node: node}
	agent := b.container("log-agent", "log-agent", "-source", "/shared/app.log", "-sink", "/events/shipped", "-budget", "2s")
	main := b.container("main", "app", "-log", "/shared/app.log", "-exit-after", "3s")
	pod := b.pod(nil, []corev1.Container{main, agent})
	if withSidecar {
		pod = b.pod([]corev1.Container{native(agent)}, []corev1.Container{main})
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	zero := int32(0)
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{BackoffLimit: &zero, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
}

// jobPods says where a Job's Pods stand.
func (s *Sidecars) jobPods(ctx context.Context, ns, job string) string {
	pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return err.Error()
	}
	out := ""
	for _, p := range pods.Items {
		out += fmt.Sprintf("%s %s [%s] ", p.Name, p.Status.Phase, containerStates(&p))
	}
	return out
}

// CheckResources judges sidecar.resources.formula: the requests
// ResourceQuota charges a Pod follow KEP-753's formula, computed here,
// with the helper as a native sidecar and as a regular container.
func (s *Sidecars) CheckResources(ctx context.Context) certify.Verdict {
	ev, err := s.resources(ctx)
	return verdict("sidecar.resources.formula", ev, err)
}

func (s *Sidecars) resources(ctx context.Context) ([]string, error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	if _, err := s.cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "quota"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU: resource.MustParse("10"), corev1.ResourceRequestsMemory: resource.MustParse("10Gi")}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	var ev []string
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
		b := podBuilder{image: s.image, ns: ns, name: c.name}
		proxy := withRequests(b.container("proxy", "proxy", "-load-after", "0s"), "100m", "32Mi")
		setup := withRequests(b.container("setup", "app", "-exit-after", "1s"), "500m", "64Mi")
		app := withRequests(b.container("app", "app"), "200m", "128Mi")
		pod := b.pod([]corev1.Container{setup}, []corev1.Container{app, proxy})
		if c.withSidecar {
			pod = b.pod([]corev1.Container{native(proxy), setup}, []corev1.Container{app})
		}
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
		var used corev1.ResourceList
		if err := wait.For(ctx, "certify/sidecar-event", fmt.Sprintf("ResourceQuota to charge the %s Pod requests.cpu=%s requests.memory=%s", c.name, c.cpu, c.memory),
			func(ctx context.Context) (bool, string, error) {
				q, err := s.cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				used = q.Status.Used
				cpu, mem := used[corev1.ResourceRequestsCPU], used[corev1.ResourceRequestsMemory]
				return cpu.Cmp(want[corev1.ResourceRequestsCPU]) == 0 && mem.Cmp(want[corev1.ResourceRequestsMemory]) == 0,
					fmt.Sprintf("charged requests.cpu=%s requests.memory=%s", cpu.String(), mem.String()), nil
			}); err != nil {
			return ev, err
		}
		cpu, mem := used[corev1.ResourceRequestsCPU], used[corev1.ResourceRequestsMemory]
		ev = append(ev, fmt.Sprintf("%s helper: ResourceQuota charged requests.cpu=%s requests.memory=%s (formula %s, %s)", c.name, cpu.String(), mem.String(), c.cpu, c.memory))
		if err := s.cs.CoreV1().Pods(ns).Delete(ctx, c.name, metav1.DeleteOptions{}); err != nil {
			return ev, err
		}
		if _, err := s.waitGone(ctx, ns, c.name, 2*time.Minute); err != nil {
			return ev, err
		}
	}
	return ev, nil
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
