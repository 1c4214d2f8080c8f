package restarts

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// comparePods records every container of after whose restart count rose
// since before (init containers, native sidecars among them, too), a
// container newly killed for memory that was not started again, and a
// Pod the kubelet newly evicted (its containers with it).
func (m *Monitor) comparePods(before, after *corev1.Pod) {
	if before.UID != after.UID {
		return // a new Pod under the same name starts from zero
	}
	if after.Status.Reason == "Evicted" {
		if before.Status.Reason != "Evicted" {
			m.addEviction(after.UID, Event{Kind: Evicted, Time: time.Now(), Node: after.Spec.NodeName, Namespace: after.Namespace, Pod: after.Name,
				Reason: after.Status.Reason, Message: after.Status.Message})
		}
		// Its containers, killed by the eviction, are that one event: the
		// kubelet reports each terminated (ContainerStatusUnknown, 137)
		// with its restart count raised, in the same update.
		return
	}
	was := map[string]corev1.ContainerStatus{}
	for _, st := range statuses(before) {
		was[st.Name] = st
	}
	for _, st := range statuses(after) {
		prev := was[st.Name]
		if st.RestartCount > prev.RestartCount {
			e := Event{Kind: Container, Time: time.Now(), Node: after.Spec.NodeName, Namespace: after.Namespace, Pod: after.Name,
				Container: st.Name, Count: st.RestartCount, PodCreated: after.CreationTimestamp.Time}
			if t := st.LastTerminationState.Terminated; t != nil {
				e.ExitCode, e.Reason = t.ExitCode, t.Reason
				if !t.FinishedAt.IsZero() {
					e.Time = t.FinishedAt.Time
				}
			}
			i := m.add(e)
			m.spawn(func() { m.readLogs(i, e) })
			continue
		}
		if t := st.State.Terminated; t != nil && t.Reason == "OOMKilled" && prev.State.Terminated == nil {
			e := Event{Kind: OOMKilled, Time: t.FinishedAt.Time, Node: after.Spec.NodeName, Namespace: after.Namespace, Pod: after.Name,
				Container: st.Name, ExitCode: t.ExitCode, Reason: t.Reason}
			if e.Time.IsZero() {
				e.Time = time.Now()
			}
			m.add(e)
		}
	}
}

func statuses(p *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
}

// readLogs keeps the last lines the restarted container's previous
// instance wrote, read at once: the Pod may be gone later.
func (m *Monitor) readLogs(i int, e Event) {
	ctx, cancel := context.WithTimeout(m.logCtx, 10*time.Second)
	defer cancel()
	tail := int64(logLines)
	raw, err := m.cs.CoreV1().Pods(e.Namespace).GetLogs(e.Pod, &corev1.PodLogOptions{Container: e.Container, Previous: true, TailLines: &tail}).DoRaw(ctx)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if err != nil {
		lines = []string{"(the previous instance's log could not be read: " + err.Error() + ")"}
	}
	m.setLogs(i, lines)
}

func ready(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// compareNodes records a node whose Ready condition left True, and
// follows the journal of one that became Ready.
func (m *Monitor) compareNodes(before, after *corev1.Node) {
	if before.UID != after.UID {
		return
	}
	was, now := ready(before), ready(after)
	if now == nil {
		return
	}
	if now.Status == corev1.ConditionTrue {
		m.follow(after.Name, time.Now())
		return
	}
	if was != nil && was.Status == corev1.ConditionTrue {
		e := Event{Kind: NotReady, Time: now.LastTransitionTime.Time, Node: after.Name, Reason: now.Reason, Message: now.Message}
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		i := m.add(e)
		m.spawn(func() { m.readKubeletErrors(i, e.Node, e.Time) })
	}
}
