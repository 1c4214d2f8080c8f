package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/harness/wait"
)

// LegacyAnnotation keeps, on a migrated Deployment, the Pod template it
// had before: what a rollback restores.
const LegacyAnnotation = "skewer.io/legacy-template"

// Target is one Deployment to migrate.
type Target struct{ Namespace, Name string }

func (t Target) String() string { return t.Namespace + "/" + t.Name }

// Migration moves helper containers of Deployments to native sidecars,
// batch by batch, stopping at the first batch that breaches a condition.
// Batches are listed (Batches) or picked by namespace and label selector
// (Selections, one batch each), not both.
type Migration struct {
	Client kubernetes.Interface
	// Helpers names the containers to make native sidecars.
	Helpers    []string
	Batches    [][]Target
	Selections []Selection
	Stop       StopConditions
	// Settle is how long a batch's new Pods are watched for restarts and
	// readiness failures once they are ready.
	Settle time.Duration
}

// Validate refuses a migration that could not do what it says, before
// Run changes anything.
func (m *Migration) Validate() error {
	switch {
	case m.Client == nil:
		return errors.New("invalid migration: no Client")
	case len(m.Helpers) == 0:
		return errors.New("invalid migration: no Helpers to make native sidecars")
	case len(m.Batches) == 0 && len(m.Selections) == 0:
		return errors.New("invalid migration: no Batches and no Selections")
	case len(m.Batches) > 0 && len(m.Selections) > 0:
		return errors.New("invalid migration: both Batches and Selections: say the batches one way")
	case m.Settle < 0:
		return fmt.Errorf("invalid migration: Settle %s is negative", m.Settle)
	}
	for i, batch := range m.Batches {
		if len(batch) == 0 {
			return fmt.Errorf("invalid migration: batch %d is empty", i+1)
		}
	}
	for i, sel := range m.Selections {
		if err := sel.Validate(); err != nil {
			return fmt.Errorf("invalid migration: selection %d: %w", i+1, err)
		}
	}
	if err := m.Stop.Validate(); err != nil {
		return fmt.Errorf("invalid migration: %w", err)
	}
	return nil
}

// BatchResult is what one batch did and what was measured of it.
type BatchResult struct {
	Targets []Target
	// Took is the time until every Deployment of the batch was rolled out.
	Took time.Duration
	// Unavailable is the worst look at the batch's replicas during its
	// rollout.
	Unavailable       Unavailable
	Restarts          int32
	ReadinessFailures int32
	// Replaced are the Pods the batch replaced. Moved are the others of
	// its Pods seen running during its rollout and gone once it settled:
	// taken off a node drained meanwhile, or made by the old ReplicaSet in
	// their place and replaced in turn. LostLines is what both lost, when
	// the stop conditions count it.
	Replaced, Moved []corev1.Pod
	LostLines       int
	// Breach says which stop conditions the batch breached, if any.
	Breach string
}

// Run migrates batch after batch; a breach ends it with the batches done
// so far (the breaching one last), and no later batch is touched. Each
// batch is checked before it changes anything (preflight: what the API
// server would store of its Deployments and admit of their Pods) and
// after it rolled out (Verify: the Pods actually admitted); a mismatch is
// a breach naming the container and the field. An invalid migration
// (Validate), or selections that pick nothing, are refused before
// anything changes.
func (m *Migration) Run(ctx context.Context) ([]BatchResult, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	batches := m.Batches
	if len(m.Selections) > 0 {
		var err error
		if batches, err = selectBatches(ctx, m.Client, m.Selections); err != nil {
			return nil, err
		}
	}
	var out []BatchResult
	for _, batch := range batches {
		res, err := m.runBatch(ctx, batch)
		if err != nil {
			return out, err
		}
		out = append(out, res)
		if res.Breach != "" {
			return out, nil
		}
	}
	return out, nil
}

// runBatch migrates one batch and measures it against the stop
// conditions.
func (m *Migration) runBatch(ctx context.Context, batch []Target) (BatchResult, error) {
	res := BatchResult{Targets: batch}
	start := time.Now()
	var drafts []*appsv1.Deployment
	for _, t := range batch {
		d, err := m.draft(ctx, t)
		if err != nil {
			return res, err
		}
		if err := preflight(ctx, m.Client, t, d, m.Helpers); err != nil {
			res.Breach = "before: " + err.Error() // nothing of the batch changed
			return res, nil
		}
		drafts = append(drafts, d)
	}
	replaced, err := PodsOf(ctx, m.Client, batch)
	if err != nil {
		return res, err
	}
	res.Replaced = replaced
	for i, t := range batch {
		if _, err := m.Client.AppsV1().Deployments(t.Namespace).Update(ctx, drafts[i], metav1.UpdateOptions{}); err != nil {
			return res, fmt.Errorf("failed to migrate %s: %w", t, err)
		}
	}
	ran := map[types.UID]corev1.Pod{}
	res.Unavailable, err = waitRolledOut(ctx, m.Client, batch, start.Add(m.Stop.ReadyWithin), ran)
	res.Took = time.Since(start)
	if err != nil { // and whatever else it breached meanwhile
		res.Breach = strings.Join(append([]string{fmt.Sprintf("ReadyWithin %s breached: %v", m.Stop.ReadyWithin, err)}, m.Stop.breaches(res, m.Settle)...), "; ")
		return res, nil
	}
	if err := m.settled(ctx, &res, ran); err != nil {
		return res, err
	}
	if b := m.Stop.breaches(res, m.Settle); len(b) > 0 {
		res.Breach = strings.Join(b, "; ")
		return res, nil
	}
	for _, t := range batch {
		if err := Verify(ctx, m.Client, t, m.Helpers); err != nil {
			res.Breach = "after: " + err.Error()
			break
		}
	}
	return res, nil
}

// settled measures res's batch once rolled out, after m.Settle: its new
// Pods' restarts and readiness failures, which of the Pods that ran
// during its rollout (ran) moved, and the lines the Pods it replaced and
// those that moved lost once they are gone.
func (m *Migration) settled(ctx context.Context, res *BatchResult, ran map[types.UID]corev1.Pod) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(m.Settle):
	}
	fresh, err := newPods(ctx, m.Client, res.Targets, res.Replaced)
	if err != nil {
		return err
	}
	res.Moved = moved(ran, res.Replaced, fresh)
	res.Restarts = Restarts(fresh)
	if res.ReadinessFailures, err = ReadinessFailures(ctx, m.Client, fresh); err != nil {
		return err
	}
	if m.Stop.LostLines == nil {
		return nil
	}
	gone := append(slices.Clone(res.Replaced), res.Moved...)
	if err := waitGone(ctx, m.Client, gone); err != nil {
		return err
	}
	if res.LostLines, err = m.Stop.LostLines(ctx, gone); err != nil {
		return fmt.Errorf("failed to count the lines the replaced and moved Pods lost: %w", err)
	}
	return nil
}

// moved are the Pods of ran neither replaced by the batch nor among its
// Pods now (fresh), in the order they were first seen.
func moved(ran map[types.UID]corev1.Pod, replaced, fresh []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for uid, p := range ran {
		known := func(q corev1.Pod) bool { return q.UID == uid }
		if !slices.ContainsFunc(replaced, known) && !slices.ContainsFunc(fresh, known) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

// draft is t's Deployment migrated, not yet stored: its template recorded
// and its helpers made native sidecars.
func (m *Migration) draft(ctx context.Context, t Target) (*appsv1.Deployment, error) {
	d, err := m.Client.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", t, err)
	}
	legacy, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return nil, err
	}
	native, err := NativeSpec(d.Spec.Template.Spec, m.Helpers)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[LegacyAnnotation] = string(legacy)
	d.Spec.Template.Spec = native
	return d, nil
}

// NativeSpec moves the named helper containers to the front of the init
// containers as native sidecars, everything else about them unchanged.
func NativeSpec(spec corev1.PodSpec, helpers []string) (corev1.PodSpec, error) {
	out := *spec.DeepCopy()
	always := corev1.ContainerRestartPolicyAlways
	var sidecars, rest []corev1.Container
	for _, c := range out.Containers {
		if slices.Contains(helpers, c.Name) {
			c.RestartPolicy = &always
			sidecars = append(sidecars, c)
		} else {
			rest = append(rest, c)
		}
	}
	if len(sidecars) != len(helpers) {
		return out, fmt.Errorf("helpers %v: only %d found among the containers", helpers, len(sidecars))
	}
	if len(rest) == 0 {
		return out, fmt.Errorf("no container left besides the helpers")
	}
	out.Containers = rest
	out.InitContainers = append(sidecars, out.InitContainers...)
	return out, nil
}

// waitRolledOut waits until every Deployment of batch has rolled out
// its current template, or deadline passes, looking every half second;
// it returns the worst look at their unavailable replicas meanwhile, and
// keeps in ran each Pod of theirs seen running, as last seen so.
func waitRolledOut(ctx context.Context, cs kubernetes.Interface, batch []Target, deadline time.Time, ran map[types.UID]corev1.Pod) (Unavailable, error) {
	var worst Unavailable
	what := fmt.Sprint(batch, " rolled out")
	budget := untilDeadline(deadline)
	budget.Interval = min(budget.Interval, 500*time.Millisecond)
	err := wait.Within(ctx, budget, what, func(ctx context.Context) (bool, string, error) {
		var states []string
		all := true
		for _, t := range batch {
			d, err := cs.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			done, state := RolledOut(d)
			all = all && done
			states = append(states, t.String()+": "+state)
			if u := unavailable(d); u > worst.Replicas {
				worst = Unavailable{Target: t, Replicas: u, Of: replicas(d), At: time.Now()}
			}
			pods, err := podsOf(ctx, cs, d)
			if err != nil {
				return false, "", err
			}
			for _, p := range pods {
				if p.Status.Phase == corev1.PodRunning {
					ran[p.UID] = p
				}
			}
		}
		return all, strings.Join(states, ", "), nil
	})
	return worst, err
}

// untilDeadline is the budget left to a batch. A Deployment whose turn
// comes after an earlier one of its batch used up the time still gets one
// look: it may have rolled out meanwhile.
func untilDeadline(deadline time.Time) wait.Budget {
	left := max(time.Until(deadline).Round(time.Millisecond), time.Millisecond)
	return wait.Budget{Timeout: left, Interval: min(time.Second, left)}
}

// RolledOut says whether d runs its current template in every replica,
// and if not, how far it is.
func RolledOut(d *appsv1.Deployment) (bool, string) {
	want := replicas(d)
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return false, fmt.Sprintf("generation %d not yet observed (observed %d)", d.Generation, st.ObservedGeneration)
	}
	done := st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want
	return done, fmt.Sprintf("%d updated, %d available, %d total of %d", st.UpdatedReplicas, st.AvailableReplicas, st.Replicas, want)
}

// replicas is what d's spec asks for.
func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas != nil {
		return *d.Spec.Replicas
	}
	return 1
}

// unavailable is how many replicas d has short of its spec's available.
func unavailable(d *appsv1.Deployment) int32 {
	return max(replicas(d)-d.Status.AvailableReplicas, 0)
}
