package sidecarchecks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/version"
)

// poolLabel marks the workers the replaced worker's Deployment may run
// on: the old one, then its replacement.
const poolLabel = "skewer.io/sidecar-pool"

// CheckWorkerReplaced judges sidecar.worker-replaced: a worker of the
// older kubelet, running a Deployment's Pod with two native sidecars (a
// log agent shipping the app's lines, a proxy), is replaced by surge with
// a worker of the newer kubelet, as a node pool upgrade does it: the new
// worker joins, the old is drained (the Pod evicted: the app stopped
// first, then the sidecars in reverse order, every line shipped within
// its grace period) and removed, and the Pod comes back on the new worker
// with its sidecars started before the app. The cluster keeps the new
// worker: this check runs last. Beside it, sidecar.migration.node-replaced:
// a legacy Deployment on the same worker is migrated while the drain
// takes it (judgeNodeReplaced).
func (s *Sidecars) CheckWorkerReplaced(ctx context.Context) []promise.Verdict {
	const id, batch = "sidecar.worker-replaced", "sidecar.migration.node-replaced"
	ev, b, err := s.replaceWorker(ctx)
	out := []promise.Verdict{verdict(id, ev, err)}
	if b == nil {
		return append(out, failed(batch, "the worker's replacement, before the batch began: %v", err))
	}
	return append(out, JudgeNodeReplaced(b.MovedBatch))
}

// replaceWorker replaces the old worker under the fleet's Pod and the
// moving Deployment's batch, and says what it saw of the fleet; what it
// saw of the batch is in the batchRun (nil when it never began).
func (s *Sidecars) replaceWorker(ctx context.Context) ([]string, *batchRun, error) {
	if len(s.Kubelets) < 2 || s.Kubelets[0].Role != cluster.RoleWorker {
		return nil, nil, fmt.Errorf("no worker at an older kubelet than the newest among %v: nothing to replace", s.Kubelets)
	}
	old, newer := s.Kubelets[0], s.Kubelets[len(s.Kubelets)-1].Version
	to, err := version.Parse(newer)
	if err != nil {
		return nil, nil, err
	}
	f, err := s.deployFleet(ctx, old)
	if f.cleanUp != nil {
		defer f.cleanUp()
	}
	if err != nil {
		return nil, nil, err
	}
	ev := []string{fmt.Sprintf("Deployment %s/%s's Pod %s ready on %s, its log agent shipping; Deployment %s/%s's two legacy Pods there",
		f.ns, f.b.name, f.first.Name, old, f.ns, movingName)}
	b := s.startBatch(ctx, f.ns)
	defer b.stop()
	b.Failed = s.inFlight(ctx, b, old.Node)
	node, line, err := s.takeJoined(ctx, to, f.ns)
	if err != nil {
		return ev, b, err
	}
	b.Old, b.New = old.Name, node.Name
	ev = append(ev, line)
	line, err = s.drainUnder(ctx, f, b, old)
	if err != nil {
		return ev, b, err
	}
	ev = append(ev, line)
	if err := rollout.RemoveWorker(ctx, s.c, old.Node); err != nil {
		return ev, b, err
	}
	s.Kubelets[0] = Kubelet{Node: node, Version: newer} // the old one is gone

	back, err := s.cameBack(ctx, f.ns, f.b.name, node)
	if err != nil {
		return ev, b, err
	}
	return append(ev, fmt.Sprintf("%s removed; %s", old.Name, back)), b, nil
}

// drainUnder drains the old worker under the fleet's Pod and the batch
// in flight, and judges how the fleet's Pod stopped (every line shipped);
// how the batch's native Pods there stopped, the migration's outcome and
// its Pods after it go to b.
func (s *Sidecars) drainUnder(ctx context.Context, f *aFleet, b *batchRun, old Kubelet) (string, error) {
	pods, dirs := []corev1.Pod{*f.first}, []string{f.b.name}
	if b.Failed == nil {
		onOld, err := s.batchPodsOn(ctx, b.target, old.Name)
		if err != nil {
			return "", err
		}
		b.OnOld = onOld
		for _, p := range onOld {
			pods, dirs = append(pods, p), append(dirs, movingName+"/"+p.Name)
		}
	}
	b.Drained = time.Now()
	stops := s.watchGone(ctx, old.Node, pods, dirs, b.Drained)
	if err := rollout.DrainWorker(ctx, s.c, old.Node); err != nil {
		return "", err
	}
	seen := stops()
	b.Stops = seen[1:]
	select {
	case <-b.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	var err error
	if b.After, err = sidecar.PodsOf(ctx, s.cs, []sidecar.Target{b.target}); err != nil {
		return "", err
	}
	fleet := seen[0]
	if fleet.Err == nil && fleet.Lost != 0 {
		fleet.Err = fmt.Errorf("%d lines lost with time to flush them: %s", fleet.Lost, fleet.Line)
	}
	if fleet.Err != nil {
		return "", fmt.Errorf("the Pod evicted from %s: %w", old.Name, fleet.Err)
	}
	return fmt.Sprintf("%s drained: %s", old.Name, fleet.Line), nil
}

// cameBack waits for the Deployment app's Pod ready on node, its
// containers started in order (the log agent, the proxy, the app) and its
// log agent shipping, and says so.
func (s *Sidecars) cameBack(ctx context.Context, ns, app string, node cluster.Node) (string, error) {
	second, err := s.fleetPodOn(ctx, ns, app, node.Name)
	if err != nil {
		return "", err
	}
	evs, err := events(ctx, node, ns, app)
	if err != nil {
		return "", err
	}
	agent, proxy, started, err := startedInOrder(node.Name, evs)
	if err != nil {
		return "", err
	}
	if err := waitShipping(ctx, node, ns, app); err != nil {
		return "", err
	}
	return fmt.Sprintf("Pod %s ready on %s: the log agent, the proxy %s later, the app %s after the proxy, shipping again",
		second.Name, node.Name, proxy.Sub(agent).Round(time.Millisecond), started.Sub(proxy).Round(time.Millisecond)), nil
}

// fleetCase is how the fleet's log agent ships and must flush when its
// Pod is evicted.
var fleetCase = terminationCase{grace: 30, perLine: "1ms", budget: "10s", rate: "50", mustFlush: true}

// aFleet is the check's Deployment on the old worker, its Pod ready
// there (first) and its log agent shipping; cleanUp deletes its
// namespace.
type aFleet struct {
	ns      string
	b       podBuilder
	first   *corev1.Pod
	cleanUp func()
}

// deployFleet runs the check's Deployment on the old worker, in a
// namespace of its own whose node pool it is. It runs once the checks
// before it are done: the eviction check wants the worker to itself.
func (s *Sidecars) deployFleet(ctx context.Context, old Kubelet) (*aFleet, error) {
	f := &aFleet{}
	var err error
	if f.ns, f.cleanUp, err = s.namespace(ctx, nil); err != nil {
		return f, err
	}
	f.b = podBuilder{image: s.image, ns: f.ns, name: "fleet"}
	f.first, err = s.runFleet(ctx, f.b, old)
	return f, err
}

// runFleet runs the Deployment b on the old worker, in the node pool of
// b's namespace, and waits until its Pod is ready there and its log
// agent ships.
func (s *Sidecars) runFleet(ctx context.Context, b podBuilder, old Kubelet) (*corev1.Pod, error) {
	if err := s.labelPool(ctx, old.Name, b.ns); err != nil {
		return nil, err
	}
	pod := shippingPod(b, fleetCase)
	pod.Spec.NodeSelector = map[string]string{poolLabel: b.ns}
	one := int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
	if _, err := s.cs.AppsV1().Deployments(b.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	first, err := s.fleetPodOn(ctx, b.ns, b.name, old.Name)
	if err != nil {
		return nil, err
	}
	if err := waitShipping(ctx, old.Node, b.ns, b.name); err != nil {
		return nil, err
	}
	return first, s.runMoving(ctx, b.ns)
}

// takeJoined is the new worker at version to, joined ahead by StartWorker
// or now: once it is Ready it is let into scheduling and the node pool of
// ns. It says how long the join took.
func (s *Sidecars) takeJoined(ctx context.Context, to version.Version, ns string) (cluster.Node, string, error) {
	j := s.joined
	if j == nil {
		j = s.join(ctx, to)
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		return cluster.Node{}, "", ctx.Err()
	}
	if j.err != nil {
		return cluster.Node{}, "", fmt.Errorf("the new worker: %w", j.err)
	}
	if err := s.release(ctx, j.node.Name); err != nil {
		return cluster.Node{}, "", err
	}
	if err := s.labelPool(ctx, j.node.Name, ns); err != nil {
		return cluster.Node{}, "", err
	}
	return j.node, fmt.Sprintf("%s joined at %s in %s, held out of scheduling until now", j.node.Name, to, j.took.Round(time.Second)), nil
}

// heldTaint keeps every Pod off the worker CheckWorkerReplaced brings in
// until that check takes it: joined beside the other sidecar checks
// (StartWorker), it has no fixture image until it is loaded, and a Pod of
// theirs that landed there could not start.
var heldTaint = corev1.Taint{Key: "skewer.io/sidecar-worker-held", Effect: corev1.TaintEffectNoSchedule}

// aJoin is a worker joining at the newer kubelet: done closes once it is
// Ready with the fixture image, or err says why not.
type aJoin struct {
	done chan struct{}
	node cluster.Node
	took time.Duration
	err  error
}

// join starts joining a worker at version to, held by heldTaint, and
// loads the fixture image into it.
func (s *Sidecars) join(ctx context.Context, to version.Version) *aJoin {
	j := &aJoin{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		start := time.Now()
		if j.node, j.err = rollout.AddWorker(ctx, s.c, to, heldTaint); j.err != nil {
			return
		}
		j.took = time.Since(start)
		j.err = cluster.LoadImagesOn(ctx, []cluster.Node{j.node}, s.image)
	}()
	return j
}

// StartWorker begins what CheckWorkerReplaced needs before it replaces
// the old worker: the new worker's join (40-90 s under load), held out of
// scheduling until that check takes it - beside the other sidecar checks
// instead of after them (none of theirs lands on the new node). stop
// cancels the join if it is still under way and waits for it; the caller
// calls it once the checks are done, whatever they did. Without an older
// worker to replace it starts nothing: the check says so.
func (s *Sidecars) StartWorker(ctx context.Context) (stop func()) {
	if len(s.Kubelets) < 2 || s.Kubelets[0].Role != cluster.RoleWorker {
		return func() {}
	}
	to, err := version.Parse(s.Kubelets[len(s.Kubelets)-1].Version)
	if err != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	s.joined = s.join(ctx, to)
	return func() {
		cancel()
		<-s.joined.done
	}
}

// release takes heldTaint off node.
func (s *Sidecars) release(ctx context.Context, node string) error {
	n, err := s.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var kept []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != heldTaint.Key {
			kept = append(kept, t)
		}
	}
	n.Spec.Taints = kept
	if _, err := s.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("failed to take %s off %s: %w", heldTaint.Key, node, err)
	}
	return nil
}

// startedInOrder judges sidecar.worker-replaced on what the Pod back on
// the new worker node recorded (evs): the log agent, then the proxy, then
// the app started; and when each did.
func startedInOrder(node string, evs []fixtures.Event) (agent, proxy, app time.Time, err error) {
	if agent, err = firstEvent(evs, "log-agent", "start"); err != nil {
		return
	}
	if proxy, err = firstEvent(evs, "proxy", "start"); err != nil {
		return
	}
	if app, err = firstEvent(evs, "app", "start"); err != nil {
		return
	}
	if !proxy.After(agent) || !app.After(proxy) {
		err = fmt.Errorf("on %s the containers did not start in order (log agent, proxy, then the app): %s", node, eventLines(evs))
	}
	return
}

// labelPool puts node in the pool ns's Deployment runs on.
func (s *Sidecars) labelPool(ctx context.Context, node, ns string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{poolLabel: ns}}})
	if _, err := s.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to label %s: %w", node, err)
	}
	return nil
}

// fleetPodOn waits until the Deployment's Pod on node is Ready and
// returns it.
func (s *Sidecars) fleetPodOn(ctx context.Context, ns, app, node string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := s.waitDeployment(ctx, ns, app, "ready on "+node, func(*appsv1.Deployment) bool {
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false
		}
		for i, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				pod = &pods.Items[i]
				return true
			}
		}
		return false
	})
	return pod, err
}
