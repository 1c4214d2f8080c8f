// Package sidecarchecks holds the checks of native sidecars: what a
// kubelet of each version does with them (start order, a crash restarted
// alone, termination order and flush, Jobs) and what the API does with
// them (readiness gating a rollout, the quota's formula, a webhook that
// strips restartPolicy, a migration in batches and its rollback, its canary
// beside the legacy template, a migrated helper's least privilege). Each is
// a method of Sidecars returning verdicts; skewer certify calls them after
// its roll-through, suites/sidecar on a cluster of its own.
package sidecarchecks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// Kubelet is a node and the version its kubelet reports.
type Kubelet struct {
	cluster.Node
	Version string
}

func (k Kubelet) String() string { return k.Name + " (kubelet " + k.Version + ")" }

// Sidecars is what the sidecar checks share: the cluster, the fixture
// image loaded into its nodes, and one node per kubelet version. A
// kubelet's behaviour is checked on each of them: on the sidecar profile
// they are workers of both versions; after a control-plane upgrade the
// newer kubelets are the control planes' (the checks' Pods tolerate
// their taint) and the older the workers'.
type Sidecars struct {
	c        *cluster.Cluster
	cs       kubernetes.Interface
	image    string
	Kubelets []Kubelet
	made     atomic.Int64
	// joined is the worker StartWorker began joining, if it did.
	joined *aJoin
	// canary is the canary's comparison, once CheckCanary made it.
	canary atomic.Pointer[report.Canary]
}

// New finds one node per kubelet version in c, workers first.
func New(ctx context.Context, c *cluster.Cluster, image string) (*Sidecars, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(nodes, func(i, j int) bool {
		return nodes[i].Role == cluster.RoleWorker && nodes[j].Role != cluster.RoleWorker
	})
	s := &Sidecars{c: c, cs: cs, image: image}
	seen := map[string]bool{}
	for _, n := range nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the kubelet of %s: %w", n.Name, err)
		}
		if v := node.Status.NodeInfo.KubeletVersion; !seen[v] {
			seen[v] = true
			s.Kubelets = append(s.Kubelets, Kubelet{Node: n, Version: v})
		}
	}
	sort.Slice(s.Kubelets, func(i, j int) bool { return s.Kubelets[i].Version < s.Kubelets[j].Version })
	return s, nil
}

// Nodes are the names of the kubelets' nodes.
func (s *Sidecars) Nodes() []string {
	out := make([]string, len(s.Kubelets))
	for i, k := range s.Kubelets {
		out[i] = k.Name
	}
	return out
}

// failed is a failed verdict that says what went wrong.
func failed(id promise.ID, format string, args ...any) promise.Verdict {
	return promise.Verdict{ID: id, Outcome: promise.Fail, Reason: fmt.Sprintf(format, args...)}
}

// verdict is id's verdict on a check's evidence and error.
func verdict(id promise.ID, ev []string, err error) promise.Verdict {
	if err != nil {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: err.Error()}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

// namespace makes a namespace for one check; done deletes it (with a
// fresh context: it runs after a cancelled check too).
func (s *Sidecars) namespace(ctx context.Context, labels map[string]string) (name string, done func(), err error) {
	name = fmt.Sprintf("skewer-sidecar-%d-%d", time.Now().Unix()%100000, s.made.Add(1))
	_, err = s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, err
	}
	return name, func() {
		_ = s.cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	}, nil
}

// sidecarEventsDir is where, on its node, a Pod's fixtures record their
// events: a hostPath, so the record outlives the Pod.
func sidecarEventsDir(ns, pod string) string { return "/var/lib/skewer-sidecar/" + ns + "/" + pod }

// events reads what a Pod's fixtures recorded on node.
func events(ctx context.Context, node cluster.Node, ns, pod string) ([]fixtures.Event, error) {
	raw, err := node.Run(ctx, "cat", sidecarEventsDir(ns, pod)+"/events")
	if err != nil {
		return nil, nil // none recorded yet
	}
	return fixtures.ParseEvents(raw)
}

// eventLines are a Pod's events as evidence.
func eventLines(ev []fixtures.Event) string {
	parts := make([]string, len(ev))
	for i, e := range ev {
		parts[i] = e.String()
	}
	return strings.Join(parts, "; ")
}

// podBuilder makes the checks' Pods from fixtures.
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

// readyProbe gates on the proxy fixture's /ready.
func readyProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     proxyGet("/ready"),
		PeriodSeconds:    1,
		FailureThreshold: 60,
	}
}

// proxyGet is a probe of the proxy fixture's path.
func proxyGet(path string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}}
}

// podGrace is the checks' Pods' grace period, in seconds, unless a check
// sets its own: room for a log agent's final flush.
const podGrace = 30

// pod is a Pod with the events and shared volumes; pinned to p.node when
// there is one, tolerating its taints (a control plane's).
func (p podBuilder) pod(init, main []corev1.Container) *corev1.Pod {
	hostPathType := corev1.HostPathDirectoryOrCreate
	grace := int64(podGrace)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns, Labels: map[string]string{"app": p.name}},
		Spec: corev1.PodSpec{
			InitContainers:                init,
			Containers:                    main,
			TerminationGracePeriodSeconds: &grace,
			Volumes: []corev1.Volume{
				{Name: "events", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: sidecarEventsDir(p.ns, p.name), Type: &hostPathType}}},
				{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if p.node != "" {
		pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": p.node}
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	return pod
}

// waitPod waits, under the budget named budget, until the Pod satisfies
// cond, and returns it.
func (s *Sidecars) waitPod(ctx context.Context, budget, ns, name, what string, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := wait.For(ctx, budget, fmt.Sprintf("Pod %s/%s: %s", ns, name, what), func(ctx context.Context) (bool, string, error) {
		p, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		pod = p
		return cond(p), fmt.Sprintf("phase %s, %s", p.Status.Phase, containerStates(p)), nil
	})
	return pod, err
}

// waitGone waits until the Pod no longer exists.
func (s *Sidecars) waitGone(ctx context.Context, ns, name string, within time.Duration) error {
	_, err := s.waitGoneSeen(ctx, ns, name, within)
	return err
}

// waitGoneSeen is waitGone, and the Pod as it was last seen before it went.
func (s *Sidecars) waitGoneSeen(ctx context.Context, ns, name string, within time.Duration) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := wait.Within(ctx, wait.Budget{Timeout: within, Interval: 200 * time.Millisecond}, fmt.Sprintf("Pod %s/%s deleted", ns, name),
		func(ctx context.Context) (bool, string, error) {
			p, err := s.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			last = p
			return false, fmt.Sprintf("phase %s, %s", p.Status.Phase, containerStates(p)), nil
		})
	return last, err
}

// lastEnded is when the last of a Pod's containers ended, as its runtime
// recorded it (to the second, in the API), read from the Pod's status;
// zero unless that status shows every container ended.
func lastEnded(p *corev1.Pod) time.Time {
	if p == nil {
		return time.Time{}
	}
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	if len(statuses) == 0 || len(statuses) != len(p.Spec.InitContainers)+len(p.Spec.Containers) {
		return time.Time{}
	}
	var last time.Time
	for _, st := range statuses {
		t := st.State.Terminated
		if t == nil {
			return time.Time{}
		}
		if t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
	}
	return last
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// appRunning: the Pod's one app container runs.
func appRunning(p *corev1.Pod) bool {
	return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
}

// containerStates is one line for all a Pod's containers: the evidence of
// its state.
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

// firstEvent is the time of who's first event starting with what, or an
// error saying it never came, with what was recorded.
func firstEvent(ev []fixtures.Event, who, what string) (time.Time, error) {
	t, ok := fixtures.First(ev, who, what)
	if !ok {
		return t, errors.New(who + " never recorded " + what + "; recorded: " + eventLines(ev))
	}
	return t, nil
}

// firstAfter is the time of the first event of who that is what, after
// t: a fixture's next start or readiness after its crash.
func firstAfter(ev []fixtures.Event, who, what string, t time.Time) (time.Time, bool) {
	for _, e := range ev {
		if e.Who == who && e.What == what && e.At.After(t) {
			return e.At, true
		}
	}
	return time.Time{}, false
}
