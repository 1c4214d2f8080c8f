package sidecarchecks

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// legacyJobWatch is how long, after its native twin completed, a Job
// whose helper is a regular container is watched not completing.
const legacyJobWatch = 10 * time.Second

// CheckJobs judges sidecar.job.completes on every kubelet: a Job whose
// log agent is a native sidecar completes once its app (exiting after
// 3 s) has; the same Job with the agent as a regular container does not
// - the reason to migrate - which is shown, not judged.
func (s *Sidecars) CheckJobs(ctx context.Context) promise.Verdict {
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
			done, err := jobCompleted(j, state)
			if err != nil {
				return false, "", err
			}
			return done, state, nil
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

// jobCompleted judges sidecar.job.completes on a Job with a native
// sidecar as last read (state: where its Pods stand): done once it
// completed, an error once it failed.
func jobCompleted(j *batchv1.Job, state string) (bool, error) {
	if j.Status.Failed > 0 {
		return false, fmt.Errorf("the Job %s failed: %s", j.Name, state)
	}
	return j.Status.CompletionTime != nil, nil
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

// CheckJobSidecarCrashes judges sidecar.job.sidecar-crashes on every
// kubelet: a Job whose app exits 0 after 20 s while its native sidecar
// crashes 2 s after each start (a crash loop) completes on the app's
// result - Complete, no failure counted against its backoffLimit of 0 -
// and the sidecar's restarts are a separate signal, read from the Pod.
func (s *Sidecars) CheckJobSidecarCrashes(ctx context.Context) promise.Verdict {
	const id = "sidecar.job.sidecar-crashes"
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return failed(id, "%v", err)
	}
	defer done()
	jobs := s.cs.BatchV1().Jobs(ns)
	for _, k := range s.Kubelets { // all at once: each runs 20 s
		b := podBuilder{image: s.image, ns: ns, name: "crashloop-" + k.Name, node: k.Name}
		proxy := native(b.container(CrashingSidecar, "proxy", "-load-after", "0s", "-crash-after", "2s"))
		pod := b.pod([]corev1.Container{proxy}, []corev1.Container{b.container("main", "app", "-exit-after", "20s")})
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		zero := int32(0)
		if _, err := jobs.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: b.name},
			Spec: batchv1.JobSpec{BackoffLimit: &zero, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}, metav1.CreateOptions{}); err != nil {
			return failed(id, "%v", err)
		}
	}
	return s.onEach(ctx, id, func(ctx context.Context, k Kubelet) ([]string, error) {
		name := "crashloop-" + k.Name
		var job *batchv1.Job
		if err := wait.For(ctx, "certify/sidecar-job", "the Job "+name+" to end", func(ctx context.Context) (bool, string, error) {
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			job = j
			return j.Status.CompletionTime != nil || j.Status.Failed > 0, s.jobPods(ctx, ns, name), nil
		}); err != nil {
			return nil, err
		}
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		if err != nil {
			return nil, err
		}
		return judgeCrashLoopJob(job, pods.Items, func() string { return s.jobPods(ctx, ns, name) })
	})
}

// judgeCrashLoopJob judges sidecar.job.sidecar-crashes on the Job once it
// ended and its Pods (state says where they stand): complete on its app's
// exit 0, its sidecar restarted, reported apart.
func judgeCrashLoopJob(job *batchv1.Job, pods []corev1.Pod, state func() string) ([]string, error) {
	if len(pods) != 1 {
		return nil, fmt.Errorf("the Job made %d Pods, want 1: %s", len(pods), state())
	}
	p := &pods[0]
	sidecar, app := p.Status.InitContainerStatuses, p.Status.ContainerStatuses
	switch {
	case len(sidecar) != 1 || len(app) != 1:
		return nil, fmt.Errorf("the Pod's statuses are not one sidecar and one app: %s", containerStates(p))
	case job.Status.CompletionTime == nil || job.Status.Failed != 0 || job.Status.Succeeded != 1:
		return nil, fmt.Errorf("the Job did not complete on its app's exit 0 (succeeded %d, failed %d): %s", job.Status.Succeeded, job.Status.Failed, containerStates(p))
	case app[0].State.Terminated == nil || app[0].State.Terminated.ExitCode != 0 || app[0].RestartCount != 0:
		return nil, fmt.Errorf("the app did not run once to exit 0: %s", containerStates(p))
	case sidecar[0].RestartCount == 0:
		return nil, fmt.Errorf("the sidecar never restarted: it was told to crash 2 s after each start: %s", containerStates(p))
	case p.Status.Phase != corev1.PodSucceeded:
		return nil, fmt.Errorf("the Pod ended %s, want Succeeded: %s", p.Status.Phase, containerStates(p))
	}
	last := "none"
	if t := sidecar[0].LastTerminationState.Terminated; t != nil {
		last = fmt.Sprintf("%s, exit %d", t.Reason, t.ExitCode)
	}
	return []string{fmt.Sprintf("the Job Complete %s after creation (succeeded %d, failed %d, backoffLimit 0), its Pod %s; its sidecar restarted %d times (last crash: %s), reported apart from the Job's result",
		job.Status.CompletionTime.Sub(job.CreationTimestamp.Time).Round(time.Second), job.Status.Succeeded, job.Status.Failed, p.Status.Phase, sidecar[0].RestartCount, last)}, nil
}
