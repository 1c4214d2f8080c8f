package sidecar

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/suite"
)

var (
	imageOnce sync.Once
	image     string
	imageErr  error
)

// fixtureImage builds the fixture image (cached by its sources) and loads
// it into every node, once per run.
func fixtureImage(ctx context.Context, t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		start := time.Now()
		image, imageErr = (&nodeimage.Builder{Out: suite.LogWriter(t)}).FixtureImage(ctx)
		if imageErr == nil {
			imageErr = s.Cluster.LoadImages(ctx, image)
		}
		t.Logf("fixture image %s built and loaded in %s", image, time.Since(start).Round(100*time.Millisecond))
	})
	NewWithT(t).Expect(imageErr).NotTo(HaveOccurred())
	return image
}

func client(t *testing.T) *kubernetes.Clientset {
	cs, err := s.Cluster.Client()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return cs
}

// namespace makes a namespace for one test, deleted when it ends.
func namespace(ctx context.Context, t *testing.T, labels map[string]string) string {
	t.Helper()
	cs := client(t)
	name := fmt.Sprintf("sidecar-%d", time.Now().UnixNano()%1_000_000_000)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// worker is a worker node and its kubelet's version.
type worker struct {
	cluster.Node
	Version string
}

func workers(ctx context.Context, t *testing.T) []worker {
	g := NewWithT(t)
	nodes, err := s.Cluster.Workers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var out []worker
	for _, n := range nodes {
		node, err := client(t).CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		out = append(out, worker{Node: n, Version: node.Status.NodeInfo.KubeletVersion})
	}
	g.Expect(out).NotTo(BeEmpty())
	return out
}

// eventsDir is where, on its node, a Pod's fixtures record their events:
// a hostPath, so the record outlives the Pod.
func eventsDir(ns, pod string) string { return "/var/lib/skewer-sidecar/" + ns + "/" + pod }

// readEvents reads the events a Pod's fixtures recorded on node.
func readEvents(ctx context.Context, t *testing.T, node cluster.Node, ns, pod string) []fixtures.Event {
	t.Helper()
	raw, err := node.Run(ctx, "cat", eventsDir(ns, pod)+"/events")
	if err != nil {
		return nil
	}
	ev, err := fixtures.ParseEvents(raw)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ev
}

func logEvents(t *testing.T, title string, ev []fixtures.Event) {
	var b strings.Builder
	for _, e := range ev {
		b.WriteString("\n  " + e.String())
	}
	t.Logf("%s:%s", title, b.String())
}

// podBuilder makes the Pods of the suite from fixtures.
type podBuilder struct {
	image, ns, name, node string
}

// container is a fixture container: role and its flags; every fixture
// records its events under its name in the Pod's events directory.
func (p podBuilder) container(name, role string, args ...string) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           p.image,
		ImagePullPolicy: corev1.PullNever,
		Args:            append([]string{role, "-name", name, "-events", "/events/events"}, args...),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "events", MountPath: "/events"},
			{Name: "shared", MountPath: "/shared"},
		},
	}
}

// native makes c a native sidecar.
func native(c corev1.Container) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func withRequests(c corev1.Container, cpu, memory string) corev1.Container {
	c.Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
	}
	return c
}

var intstr8080 = intstr.FromInt32(8080)

// readyProbe gates on the proxy fixture's /ready.
func readyProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr8080}},
		PeriodSeconds:    1,
		FailureThreshold: 60,
	}
}

// pod is a Pod on p.node with the events and shared volumes.
func (p podBuilder) pod(init, main []corev1.Container) *corev1.Pod {
	hostPathType := corev1.HostPathDirectoryOrCreate
	grace := int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns, Labels: map[string]string{"app": p.name}},
		Spec: corev1.PodSpec{
			InitContainers:                init,
			Containers:                    main,
			TerminationGracePeriodSeconds: &grace,
			Volumes: []corev1.Volume{
				{Name: "events", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: eventsDir(p.ns, p.name), Type: &hostPathType}}},
				{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if p.node != "" {
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": p.node}
	}
	return pod
}

// waitPod waits until the Pod satisfies cond, and returns it.
func waitPod(ctx context.Context, t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	NewWithT(t).Eventually(func() error {
		p, err := client(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		if !cond(p) {
			return fmt.Errorf("%s: phase %s, %s", what, p.Status.Phase, containerStates(p))
		}
		return nil
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return pod
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitGone waits until the Pod no longer exists and returns how long that took.
func waitGone(ctx context.Context, t *testing.T, ns, name string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	NewWithT(t).Eventually(func() bool {
		_, err := client(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(200*time.Millisecond).Should(BeTrue(), "Pod %s/%s deleted", ns, name)
	return time.Since(start)
}

// containerStates is one line per container: the evidence of a Pod's state.
func containerStates(p *corev1.Pod) string {
	var parts []string
	add := func(kind string, sts []corev1.ContainerStatus) {
		for _, st := range sts {
			state := "waiting"
			switch {
			case st.State.Running != nil:
				state = "running since " + st.State.Running.StartedAt.UTC().Format("15:04:05")
			case st.State.Terminated != nil:
				state = fmt.Sprintf("terminated (%s, exit %d)", st.State.Terminated.Reason, st.State.Terminated.ExitCode)
			case st.State.Waiting != nil:
				state = "waiting (" + st.State.Waiting.Reason + ")"
			}
			parts = append(parts, fmt.Sprintf("%s %s: %s, ready=%v, restarts=%d", kind, st.Name, state, st.Ready, st.RestartCount))
		}
	}
	add("init", p.Status.InitContainerStatuses)
	add("container", p.Status.ContainerStatuses)
	return strings.Join(parts, "; ")
}
