package sidecarchecks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// movingName is the legacy Deployment sidecar.migration.node-replaced
// migrates while its worker is drained: two replicas in the fleet's
// namespace and node pool, a log agent shipping the app's lines and a
// proxy as regular containers before the app.
const movingName = "moving"

// movingHelpers are its helpers, made native sidecars in this order.
var movingHelpers = []string{"log-agent", "proxy"}

// movingProbeDelay holds each of its Pods out of Ready this long after
// the proxy starts. The drain begins once a native Pod of the batch runs
// and ships on the old worker, before it is Ready: the batch cannot have
// rolled out then, since its rollout (maxSurge 1, maxUnavailable 0) makes
// its second native Pod only once the first is Ready.
const movingProbeDelay = 8 * time.Second

// movingStop are the batch's stop conditions, armed through the drain.
// ReadyWithin is the other migrations' two minutes: this batch is two
// Pods one after another, each three containers started in order and
// held movingProbeDelay, under a minute here. MaxUnavailable is what its
// disruption budget (minAvailable 1) lets a drain take of its two
// replicas; restarts and readiness failures, none.
var movingStop = sidecar.StopConditions{ReadyWithin: 2 * time.Minute, MaxUnavailable: 1}

// movingDeployment is the legacy Deployment and its disruption budget.
func movingDeployment(image, ns string) (*appsv1.Deployment, *policyv1.PodDisruptionBudget) {
	pod := shippingPod(podBuilder{image: image, ns: ns, name: movingName}, fleetCase)
	helpers := pod.Spec.InitContainers
	for i := range helpers {
		helpers[i].RestartPolicy = nil
	}
	// A probe's timeout of 5 s: a proxy that answers at all answers in
	// milliseconds, and the node may be loaded.
	helpers[1].ReadinessProbe = &corev1.Probe{ProbeHandler: proxyGet("/ready"), InitialDelaySeconds: int32(movingProbeDelay / time.Second), PeriodSeconds: 1, TimeoutSeconds: 5}
	pod.Spec.InitContainers, pod.Spec.Containers = nil, append(helpers, pod.Spec.Containers...)
	pod = perPod(pod)
	pod.Spec.NodeSelector = map[string]string{poolLabel: ns}
	two, one := int32(2), intstr.FromInt32(1)
	selector := &metav1.LabelSelector{MatchLabels: pod.Labels}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: movingName, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: selector, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: movingName, Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: selector}}
}

// runMoving runs the moving Deployment in ns until both replicas are
// available.
func (s *Sidecars) runMoving(ctx context.Context, ns string) error {
	d, pdb := movingDeployment(s.image, ns)
	if _, err := s.cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := s.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	return s.waitDeployment(ctx, ns, movingName, "available", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 2 })
}

// MovedBatch is what sidecar.migration.node-replaced is judged on: the
// moving Deployment's migration, run while its worker is drained.
type MovedBatch struct {
	// Began is just before the migration began, Drained when the drain
	// began; Old and New are the workers.
	Began, Drained time.Time
	Old, New       string
	// OnOld are the batch's native Pods on the old worker as the drain
	// began; Stops how each of them stopped.
	OnOld []corev1.Pod
	Stops []PodStop
	// Results and Err are the migration's; After the batch's Pods once it
	// ended.
	Results []sidecar.BatchResult
	Err     error
	After   []corev1.Pod
	// Failed says why the batch could not be judged as it should, though
	// the worker's replacement went on.
	Failed error
}

// PodStop is how one Pod stopped (stopped's line and lines lost, or why
// it could not be judged).
type PodStop struct {
	Pod, Line string
	Lost      int
	Err       error
}

// batchRun is a MovedBatch under way.
type batchRun struct {
	MovedBatch
	target sidecar.Target
	done   chan struct{}
	cancel context.CancelFunc
}

// stop ends the migration if it still runs and waits for it.
func (b *batchRun) stop() {
	b.cancel()
	<-b.done
}

// startBatch begins migrating the moving Deployment in ns.
func (s *Sidecars) startBatch(ctx context.Context, ns string) *batchRun {
	ctx, cancel := context.WithCancel(ctx)
	b := &batchRun{MovedBatch: MovedBatch{Began: time.Now()}, target: sidecar.Target{Namespace: ns, Name: movingName}, done: make(chan struct{}), cancel: cancel}
	m := &sidecar.Migration{Client: s.cs, Helpers: movingHelpers, Batches: [][]sidecar.Target{{b.target}}, Stop: movingStop, Settle: 5 * time.Second}
	go func() {
		defer close(b.done)
		b.Results, b.Err = m.Run(ctx)
	}()
	return b
}

// inFlight waits until a native Pod of the batch runs on the old worker
// and its log agent ships the app's lines.
func (s *Sidecars) inFlight(ctx context.Context, b *batchRun, old cluster.Node) error {
	var first corev1.Pod
	err := wait.For(ctx, "certify/sidecar-deployment", "a native Pod of the batch running on "+old.Name, func(ctx context.Context) (bool, string, error) {
		select {
		case <-b.done:
			return false, "", fmt.Errorf("the migration ended before a native Pod ran on %s: %v %s", old.Name, b.Err, describe(b.Results))
		default:
		}
		pods, err := s.batchPodsOn(ctx, b.target, old.Name)
		if err != nil || len(pods) == 0 {
			return false, fmt.Sprintf("none yet (%v)", err), nil
		}
		first = pods[0]
		return true, "", nil
	})
	if err != nil {
		return err
	}
	return waitShipping(ctx, old, b.target.Namespace, movingName+"/"+first.Name)
}

// batchPodsOn are the batch's native Pods running on node, not on their
// way out.
func (s *Sidecars) batchPodsOn(ctx context.Context, t sidecar.Target, node string) ([]corev1.Pod, error) {
	pods, err := sidecar.PodsOf(ctx, s.cs, []sidecar.Target{t})
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool {
		return p.Spec.NodeName != node || len(p.Spec.InitContainers) == 0 || p.Status.Phase != corev1.PodRunning
	}), err
}

// watchGone watches each Pod until it is gone and says, once all are,
// how each stopped on node, deleted (evicted) at deleted; dirs are their
// events directories.
func (s *Sidecars) watchGone(ctx context.Context, node cluster.Node, pods []corev1.Pod, dirs []string, deleted time.Time) func() []PodStop {
	out := make([]PodStop, len(pods))
	done := make(chan struct{}, len(pods))
	for i, p := range pods {
		go func() {
			defer func() { done <- struct{}{} }()
			last, err := s.waitGoneSeen(ctx, p.Namespace, p.Name, time.Duration(fleetCase.grace)*time.Second+time.Minute)
			out[i] = PodStop{Pod: p.Name, Err: err}
			if err == nil {
				out[i].Line, out[i].Lost, out[i].Err = stopped(ctx, node, p.Namespace, dirs[i], fleetCase, deleted, time.Since(deleted), lastEnded(last))
			}
		}()
	}
	return func() []PodStop {
		for range pods {
			<-done
		}
		return out
	}
}

// judgeNodeReplaced judges sidecar.migration.node-replaced on what was
// seen of the batch: the drain began while it rolled out and moved at
// least one of its native Pods; the batch ended without a breach, and
// on the new worker; it accounted for every native Pod that moved (its
// Moved), each of which stopped its app first and its sidecars in
// reverse order with every line shipped. A drain that caught no native
// Pod, or a batch already rolled out, proves nothing: an error.
func judgeNodeReplaced(b MovedBatch) ([]string, error) {
	switch {
	case b.Failed != nil:
		return nil, b.Failed
	case b.Err != nil:
		return nil, fmt.Errorf("the migration: %w", b.Err)
	}
	if len(b.Results) != 1 {
		return nil, fmt.Errorf("the migration ran %d batches, want the one: %s", len(b.Results), describe(b.Results))
	}
	r := b.Results[0]
	ev := []string{fmt.Sprintf("the drain of %s began %s into the batch, which rolled out in %s; %d native Pod(s) of it there then",
		b.Old, b.Drained.Sub(b.Began).Round(100*time.Millisecond), r.Took.Round(100*time.Millisecond), len(b.OnOld)),
		describe(b.Results)}
	if len(b.OnOld) == 0 || !b.Drained.Before(b.Began.Add(r.Took)) {
		return ev, errNotInFlight
	}
	if r.Breach != "" {
		return ev, fmt.Errorf("the batch breached its stop conditions across the drain: %s", r.Breach)
	}
	for _, p := range b.OnOld {
		if !slices.ContainsFunc(r.Moved, func(m corev1.Pod) bool { return m.UID == p.UID }) {
			return ev, fmt.Errorf("the batch did not account for its Pod %s, moved off %s by the drain (moved: %s)", p.Name, b.Old, podNames(r.Moved))
		}
	}
	for _, st := range b.Stops {
		switch {
		case st.Err != nil:
			return ev, fmt.Errorf("Pod %s, moved off %s: %w", st.Pod, b.Old, st.Err)
		case st.Lost != 0:
			return ev, fmt.Errorf("Pod %s, moved off %s: %d lines lost with time to flush them: %s", st.Pod, b.Old, st.Lost, st.Line)
		}
		ev = append(ev, fmt.Sprintf("Pod %s moved off %s: %s", st.Pod, b.Old, st.Line))
	}
	if len(b.Stops) != len(b.OnOld) {
		return ev, fmt.Errorf("%d of the %d native Pods moved off %s judged", len(b.Stops), len(b.OnOld), b.Old)
	}
	for _, p := range b.After {
		if p.Spec.NodeName != b.New || len(p.Spec.InitContainers) == 0 {
			return ev, fmt.Errorf("after the batch its Pod %s runs on %s with %d init containers, want native on %s", p.Name, p.Spec.NodeName, len(p.Spec.InitContainers), b.New)
		}
	}
	if len(b.After) == 0 {
		return ev, fmt.Errorf("after the batch none of its Pods runs")
	}
	return append(ev, fmt.Sprintf("the batch's Pods %s native on %s; the batch accounted for those that moved: %s", podNames(b.After), b.New, podNames(r.Moved))), nil
}

// JudgeNodeReplaced is sidecar.migration.node-replaced on what was seen
// of the batch (judgeNodeReplaced).
func JudgeNodeReplaced(b MovedBatch) promise.Verdict {
	const id = "sidecar.migration.node-replaced"
	ev, err := judgeNodeReplaced(b)
	if errors.Is(err, errNotInFlight) {
		return promise.Verdict{ID: id, Outcome: promise.Error, Evidence: ev, Reason: err.Error()}
	}
	return verdict(id, ev, err)
}

// errNotInFlight is a drain that missed the batch: nothing judged.
var errNotInFlight = errors.New("the drain did not catch the batch in flight with a native Pod on the old worker: nothing to judge")

func podNames(pods []corev1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return "[" + strings.Join(names, " ") + "]"
}
