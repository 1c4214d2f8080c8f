package sidecar

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/harness/wait"
)

// StopConditions end a migration when a batch breaches any of them. The
// bounds are inclusive and zero tolerates none.
type StopConditions struct {
	// ReadyWithin bounds the time a batch's Deployments take to finish
	// their rollout.
	ReadyWithin time.Duration
	// MaxRestarts bounds the container restarts of a batch's new Pods,
	// read once they have settled.
	MaxRestarts int32
	// MaxReadinessFailures bounds the readiness probe failures the
	// kubelets report (Unhealthy events) of a batch's new Pods.
	MaxReadinessFailures int32
	// MaxUnavailable bounds, for each Deployment of a batch, the replicas
	// short of its spec's that are not available, at any look during its
	// rollout (every half second).
	MaxUnavailable int32
	// MaxLostLines bounds the log lines lost by the Pods a batch replaced,
	// as LostLines counts them once they are gone. Without LostLines the
	// condition is not checked.
	MaxLostLines int
	// LostLines counts the lines the helpers of the replaced Pods lost on
	// their way out: what the user's log agent reports of itself.
	LostLines func(ctx context.Context, replaced []corev1.Pod) (int, error)
}

// Validate refuses stop conditions every batch would breach (the zero
// value among them), and a bound with nothing to measure it.
func (s StopConditions) Validate() error {
	switch {
	case s.ReadyWithin <= 0:
		return fmt.Errorf("invalid stop conditions: ReadyWithin %s is not positive, so every batch would breach it", s.ReadyWithin)
	case s.MaxRestarts < 0:
		return fmt.Errorf("invalid stop conditions: MaxRestarts %d is negative, so every batch would breach it", s.MaxRestarts)
	case s.MaxReadinessFailures < 0:
		return fmt.Errorf("invalid stop conditions: MaxReadinessFailures %d is negative, so every batch would breach it", s.MaxReadinessFailures)
	case s.MaxUnavailable < 0:
		return fmt.Errorf("invalid stop conditions: MaxUnavailable %d is negative, so every batch would breach it", s.MaxUnavailable)
	case s.MaxLostLines < 0:
		return fmt.Errorf("invalid stop conditions: MaxLostLines %d is negative, so every batch would breach it", s.MaxLostLines)
	case s.MaxLostLines > 0 && s.LostLines == nil:
		return fmt.Errorf("invalid stop conditions: MaxLostLines %d is set but no LostLines counts the lines", s.MaxLostLines)
	}
	return nil
}

// breaches are the conditions r breaches, each saying what it saw.
func (s StopConditions) breaches(r BatchResult, settle time.Duration) []string {
	var out []string
	if r.Unavailable.Replicas > s.MaxUnavailable {
		out = append(out, fmt.Sprintf("MaxUnavailable %d breached: %s", s.MaxUnavailable, r.Unavailable))
	}
	if r.Restarts > s.MaxRestarts {
		out = append(out, fmt.Sprintf("MaxRestarts %d breached: %d container restarts in %s", s.MaxRestarts, r.Restarts, settle))
	}
	if r.ReadinessFailures > s.MaxReadinessFailures {
		out = append(out, fmt.Sprintf("MaxReadinessFailures %d breached: %d readiness probe failures reported by the kubelets", s.MaxReadinessFailures, r.ReadinessFailures))
	}
	if s.LostLines != nil && r.LostLines > s.MaxLostLines {
		out = append(out, fmt.Sprintf("MaxLostLines %d breached: %d lines lost by the %d Pods the batch replaced", s.MaxLostLines, r.LostLines, len(r.Replaced)))
	}
	return out
}

// Unavailable is the most replicas one Deployment of a batch had short
// of available at one look during its rollout.
type Unavailable struct {
	Target   Target
	Replicas int32
	Of       int32
	At       time.Time
}

func (u Unavailable) String() string {
	if u.Replicas == 0 {
		return "no replica unavailable"
	}
	return fmt.Sprintf("%d of %d replicas of %s unavailable at %s", u.Replicas, u.Of, u.Target, u.At.UTC().Format("15:04:05.0"))
}

// PodsOf lists the Pods of the batch's Deployments, skipping those on
// their way out.
func PodsOf(ctx context.Context, cs kubernetes.Interface, batch []Target) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for _, t := range batch {
		d, err := cs.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", t, err)
		}
		pods, err := podsOf(ctx, cs, d)
		if err != nil {
			return nil, err
		}
		out = append(out, pods...)
	}
	return out, nil
}

// podsOf lists the Pods of d, skipping those on their way out.
func podsOf(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment) ([]corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		return nil, fmt.Errorf("failed to list the Pods of %s/%s: %w", d.Namespace, d.Name, err)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil }), nil
}

// newPods are the batch's Pods now that were not among replaced.
func newPods(ctx context.Context, cs kubernetes.Interface, batch []Target, replaced []corev1.Pod) ([]corev1.Pod, error) {
	now, err := PodsOf(ctx, cs, batch)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(now, func(p corev1.Pod) bool {
		return slices.ContainsFunc(replaced, func(old corev1.Pod) bool { return old.UID == p.UID })
	}), nil
}

// Restarts sums the times the containers of pods ended and were, or are
// to be, started again. The kubelet counts a restart (RestartCount) only
// once the new instance is created, after the restart back-off (10 s the
// first time); until then the container shows as ended - terminated, or
// waiting with its last termination - and that crash counts too: a
// helper that crashed a few seconds into a batch would otherwise pass a
// settle as long as the back-off.
func Restarts(pods []corev1.Pod) int32 {
	var sum int32
	for _, p := range pods {
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			n, _ := ContainerRestarts(st)
			sum += n
		}
	}
	return sum
}

// ContainerRestarts is Restarts of one container, and the last of its
// endings its status shows (nil for none): the status keeps only that
// one, so of a container that ended more than once the others are gone.
func ContainerRestarts(st corev1.ContainerStatus) (int32, *corev1.ContainerStateTerminated) {
	switch {
	case st.State.Terminated != nil:
		return st.RestartCount + 1, st.State.Terminated
	case st.State.Waiting != nil && st.LastTerminationState.Terminated != nil:
		return st.RestartCount + 1, st.LastTerminationState.Terminated
	}
	return st.RestartCount, st.LastTerminationState.Terminated
}

// ReadinessFailures counts the readiness probe failures the kubelets
// reported of pods: their Unhealthy events, each with its count.
func ReadinessFailures(ctx context.Context, cs kubernetes.Interface, pods []corev1.Pod) (int32, error) {
	uids := map[types.UID]bool{}
	namespaces := map[string]bool{}
	for _, p := range pods {
		uids[p.UID] = true
		namespaces[p.Namespace] = true
	}
	var sum int32
	for ns := range namespaces {
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,reason=Unhealthy"})
		if err != nil {
			return 0, fmt.Errorf("failed to list the Unhealthy events in %s: %w", ns, err)
		}
		for _, e := range events.Items {
			if uids[e.InvolvedObject.UID] && strings.HasPrefix(e.Message, "Readiness probe failed") {
				sum += max(e.Count, 1)
			}
		}
	}
	return sum, nil
}

// waitGone waits until every one of pods is gone from the API (or
// replaced by another of its name), within their grace periods and a
// minute: their helpers have said what they lost by then.
func waitGone(ctx context.Context, cs kubernetes.Interface, pods []corev1.Pod) error {
	for _, p := range pods {
		grace := 30 * time.Second
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
		}
		deadline := time.Now().Add(grace + time.Minute)
		if err := wait.Within(ctx, untilDeadline(deadline), "replaced Pod "+p.Namespace+"/"+p.Name+" gone", func(ctx context.Context) (bool, string, error) {
			now, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return true, "", nil
			case err != nil:
				return false, err.Error(), nil
			}
			return now.UID != p.UID, "phase " + string(now.Status.Phase), nil
		}); err != nil {
			return err
		}
	}
	return nil
}
