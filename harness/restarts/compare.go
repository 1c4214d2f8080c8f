package restarts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/internal/docker"
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
			e := restartEvent(after, st)
			i := m.add(e)
			if !e.NeverStarted { // else it wrote nothing
				m.spawn(func() { m.readLogs(i, e, logUID(after)) })
			}
			if e.NoLastState != "" {
				m.spawn(func() { m.readKubeletRecord(i, e, after.UID) })
			}
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

// restartEvent is the restart of st's container of Pod p, timed by its
// previous instance's end where the kubelet reports it.
func restartEvent(p *corev1.Pod, st corev1.ContainerStatus) Event {
	e := Event{Kind: Container, Time: time.Now(), Node: p.Spec.NodeName, Namespace: p.Namespace, Pod: p.Name,
		Container: st.Name, Count: st.RestartCount, PodCreated: p.CreationTimestamp.Time}
	if t := st.LastTerminationState.Terminated; t != nil {
		// The message is the runtime's error for a StartError
		// (the container never ran, so it has no lines of its own).
		e.ExitCode, e.Reason, e.Message = t.ExitCode, t.Reason, strings.TrimSpace(t.Message)
		if !t.FinishedAt.IsZero() {
			e.Time = t.FinishedAt.Time
		}
	} else {
		e.NeverStarted = st.LastTerminationState.Waiting != nil
		e.NoLastState = "timed when seen"
		if r := st.State.Running; r != nil && !r.StartedAt.IsZero() {
			// A status sent while the node's apiserver was down reached
			// the API late and without the last state (session 26: a
			// scheduler whose kubelet started it again at 17:02:15, seen
			// at 17:02:45, after the phase that restarted its apiserver).
			// The new instance's start bounds when the old one ended.
			e.Time = r.StartedAt.Time
			e.NoLastState = "timed by the new instance's start"
		}
	}
	return e
}

func statuses(p *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
}

// readLogs keeps the last lines the restarted container's previous
// instance wrote, read at once: the Pod may be gone later. Through the
// API first; when that fails - the node's own apiserver restarting is
// when a control-plane component restarts, and a lost lease is told by
// these lines (Cause) - from the kubelet's file in the node, which names
// an instance's log by its restart count.
func (m *Monitor) readLogs(i int, e Event, uid types.UID) {
	ctx, cancel := context.WithTimeout(m.logCtx, 10*time.Second)
	defer cancel()
	tail := int64(logLines)
	raw, err := m.cs.CoreV1().Pods(e.Namespace).GetLogs(e.Pod, &corev1.PodLogOptions{Container: e.Container, Previous: true, TailLines: &tail}).DoRaw(ctx)
	if err == nil {
		m.setLogs(i, strings.Split(strings.TrimRight(string(raw), "\n"), "\n"))
		return
	}
	file := fmt.Sprintf("/var/log/pods/%s_%s_%s/%s/%d.log", e.Namespace, e.Pod, uid, e.Container, e.Count-1)
	out, ferr := docker.ExecOutput(ctx, e.Node, "tail", "-n", strconv.Itoa(logLines), file)
	if ferr != nil {
		m.setLogs(i, []string{fmt.Sprintf("(the previous instance's log could not be read: through the API: %v; from %s in the node: %v)", err, file, ferr)})
		return
	}
	m.setLogs(i, criLogLines(string(out)))
}

// logUID is the UID that names p's log folder on its node: the kubelet's
// own, which for a static Pod is not its mirror Pod's UID in the API but
// the static Pod's (session 33: a controller manager's exit went unread,
// its log looked for under the mirror Pod's UID); a mirror Pod carries the
// static Pod's in corev1.MirrorPodAnnotationKey.
func logUID(p *corev1.Pod) types.UID {
	if uid := p.Annotations[corev1.MirrorPodAnnotationKey]; uid != "" {
		return types.UID(uid)
	}
	return p.UID
}

// criLogLines are the messages of a kubelet container log file's lines
// (CRI format: time, stream, P or F, message).
func criLogLines(raw string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(raw, "\n"), "\n") {
		if f := strings.SplitN(l, " ", 4); len(f) == 4 {
			l = f[3]
		}
		lines = append(lines, l)
	}
	return lines
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
