package sidecar

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// TestJobs: a Job whose helper is a native sidecar completes when its main
// container exits; the same Job with the helper as a regular container
// does not - the reason to migrate.
func TestJobs(t *testing.T) {
	f := features.New("jobs").WithLabel("area", "sidecar").
		Assess("a Job with a native sidecar completes; with a regular helper it never does", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, w := range workers(ctx, t) {
				jobs(ctx, t, w)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

func jobs(ctx context.Context, t *testing.T, w worker) {
	g := NewWithT(t)
	ns := namespace(ctx, t, nil)
	cs := client(t).BatchV1().Jobs(ns)
	newJob := func(name string, withSidecar bool) *batchv1.Job {
		b := podBuilder{image: fixtureImage(ctx, t), ns: ns, name: name, node: w.Name}
		agent := b.container("log-agent", "log-agent", "-source", "/shared/app.log", "-sink", "/events/shipped", "-budget", "2s")
		main := b.container("main", "app", "-log", "/shared/app.log", "-exit-after", "3s")
		var pod *corev1.Pod
		if withSidecar {
			pod = b.pod([]corev1.Container{native(agent)}, []corev1.Container{main})
		} else {
			pod = b.pod(nil, []corev1.Container{main, agent})
		}
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		zero := int32(0)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: batchv1.JobSpec{BackoffLimit: &zero, Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}}
		job.Spec.Template.ObjectMeta.Name = ""
		job.Spec.Template.ObjectMeta.Namespace = ""
		created, err := cs.Create(ctx, job, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return created
	}
	nativeJob, legacy := newJob("native", true), newJob("legacy", false)
	complete := func(name string) func() (*batchv1.Job, error) {
		return func() (*batchv1.Job, error) { return cs.Get(ctx, name, metav1.GetOptions{}) }
	}
	g.Eventually(complete(nativeJob.Name)).WithTimeout(2*time.Minute).WithPolling(time.Second).
		Should(HaveField("Status.CompletionTime", Not(BeNil())), "the Job with a native sidecar completes")
	done, err := cs.Get(ctx, nativeJob.Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	latency := done.Status.CompletionTime.Sub(done.CreationTimestamp.Time)
	// The legacy Job had as long already; it stays incomplete for 30 s more.
	g.Consistently(complete(legacy.Name)).WithTimeout(30*time.Second).WithPolling(2*time.Second).
		Should(HaveField("Status.CompletionTime", BeNil()), "the Job with a regular helper container")
	pods, err := client(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + legacy.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods.Items).To(HaveLen(1))
	state := containerStates(&pods.Items[0])
	s.Measured(t, "%s (kubelet %s): the Job with a native sidecar completed %s after creation; the Job with the helper as a regular container was still running %s after creation (%s)",
		w.Name, w.Version, latency.Round(time.Second), time.Since(legacy.CreationTimestamp.Time).Round(time.Second), state)
}
