package certification

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// sidecarNamespace holds the sidecar checks' Pods.
const sidecarNamespace = "skewer-certify-sidecar"

// kubeletsByVersion picks one node per kubelet version in c: after a
// control-plane upgrade, the control planes' kubelets run the newer
// version and the worker's the older, so both sides of the skew are
// there without a node of their own.
func kubeletsByVersion(ctx context.Context, c *cluster.Cluster) (map[string]string, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	byVersion := map[string]string{}
	for _, n := range nodes.Items {
		v := n.Status.NodeInfo.KubeletVersion
		if _, ok := byVersion[v]; !ok {
			byVersion[v] = n.Name
		}
	}
	return byVersion, nil
}

// CheckSidecarJob judges sidecar.job.completes: on a node of each kubelet
// version, a Job whose helper is a native sidecar (an init container with
// restartPolicy Always, skewer's log agent) completes once its main
// container (skewer's app, exiting after 3 s) has: the sidecar does not
// keep the Job running. image is the fixture image, loaded into the nodes.
func CheckSidecarJob(ctx context.Context, c *cluster.Cluster, image string) certify.Verdict {
	const id = "sidecar.job.completes"
	cs, err := c.Client()
	if err != nil {
		return fail(id, "%v", err)
	}
	byVersion, err := kubeletsByVersion(ctx, c)
	if err != nil {
		return fail(id, "%v", err)
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sidecarNamespace}}, metav1.CreateOptions{})
	if err != nil {
		return fail(id, "%v", err)
	}
	defer cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), sidecarNamespace, metav1.DeleteOptions{})
	versions := make([]string, 0, len(byVersion))
	for v := range byVersion {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	jobs := cs.BatchV1().Jobs(sidecarNamespace)
	for i, v := range versions {
		if _, err := jobs.Create(ctx, sidecarJob(fmt.Sprintf("native-%d", i), byVersion[v], image), metav1.CreateOptions{}); err != nil {
			return fail(id, "%v", err)
		}
	}
	var ev []string
	for i, v := range versions {
		name, node := fmt.Sprintf("native-%d", i), byVersion[v]
		var took time.Duration
		err := wait.For(ctx, "certify/sidecar-job", fmt.Sprintf("the Job %s on %s (kubelet %s) to complete", name, node, v), func(ctx context.Context) (bool, string, error) {
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			if j.Status.Failed > 0 {
				return false, "", fmt.Errorf("the Job %s on %s (kubelet %s) failed: %s", name, node, v, podStates(ctx, c, name))
			}
			if j.Status.CompletionTime == nil {
				return false, podStates(ctx, c, name), nil
			}
			took = j.Status.CompletionTime.Sub(j.CreationTimestamp.Time)
			return true, "", nil
		})
		if err != nil {
			return fail(id, "%v", err)
		}
		ev = append(ev, fmt.Sprintf("%s (kubelet %s): completed %s after creation", node, v, took.Round(time.Second)))
	}
	if len(versions) < 2 {
		return certify.Verdict{ID: id, Outcome: certify.Fail, Evidence: ev,
			Reason: fmt.Sprintf("the cluster's kubelets all run %v: one side of the skew is not checked", versions)}
	}
	return certify.Verdict{ID: id, Outcome: certify.Pass, Evidence: ev}
}

// sidecarJob is a Job on node whose log agent is a native sidecar and
// whose app exits after 3 s.
func sidecarJob(name, node, image string) *batchv1.Job {
	always := corev1.ContainerRestartPolicyAlways
	zero := int32(0)
	fixture := func(name, role string, args ...string) corev1.Container {
		return corev1.Container{Name: name, Image: image, ImagePullPolicy: corev1.PullNever,
			Args:         append([]string{role, "-name", name, "-events", "/shared/events"}, args...),
			VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}}
	}
	agent := fixture("log-agent", "log-agent", "-source", "/shared/app.log", "-sink", "/shared/shipped", "-budget", "2s")
	agent.RestartPolicy = &always
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{BackoffLimit: &zero, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"skewer.io/certify": name}},
			Spec: corev1.PodSpec{
				RestartPolicy:  corev1.RestartPolicyNever,
				NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
				Tolerations:    []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				InitContainers: []corev1.Container{agent},
				Containers:     []corev1.Container{fixture("main", "app", "-log", "/shared/app.log", "-exit-after", "3s")},
				Volumes:        []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			}}}}
}

// podStates says where a Job's Pods stand, for a wait's last state.
func podStates(ctx context.Context, c *cluster.Cluster, job string) string {
	cs, err := c.Client()
	if err != nil {
		return err.Error()
	}
	pods, err := cs.CoreV1().Pods(sidecarNamespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		var states []string
		for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case s.State.Running != nil:
				states = append(states, s.Name+" running")
			case s.State.Terminated != nil:
				states = append(states, fmt.Sprintf("%s exited %d", s.Name, s.State.Terminated.ExitCode))
			case s.State.Waiting != nil:
				states = append(states, s.Name+" waiting: "+s.State.Waiting.Reason)
			}
		}
		out = append(out, fmt.Sprintf("%s %s [%s]", p.Name, p.Status.Phase, strings.Join(states, ", ")))
	}
	return strings.Join(out, "; ")
}
