package restarts

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// kubeletLines is how many of the kubelet's events and log lines about a
// Pod are kept for a restart it reported without its last state.
const kubeletLines = 8

// kubeletLookBack is how far before such a restart the kubelet's log is
// read: the old instance's end, the sandbox's loss or the failed start
// that made the count rise came before the new instance started.
const kubeletLookBack = 2 * time.Minute

// readKubeletRecord keeps what the kubelet said of e's Pod (uid) up to
// e, for a container restart reported without its last state, whose
// exit code, reason and previous log say nothing (session 34: an app
// container of a test's Deployment started again, count 1, with no last
// state, in a phase that meant no restart, and nothing told why): the
// kubelet's events for the Pod (a sandbox it replaced, a start that
// failed, a probe that killed it) and its log lines naming the Pod.
// Read at once: the Pod and its events may be gone later.
func (m *Monitor) readKubeletRecord(i int, e Event, uid types.UID) {
	ctx, cancel := context.WithTimeout(m.logCtx, 10*time.Second)
	defer cancel()
	var record []string
	events, err := m.cs.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
	if err != nil {
		record = append(record, "(the Pod's events could not be read: "+err.Error()+")")
	} else {
		record = append(record, podEventLines(events.Items, uid, e.Time.Add(2*time.Second), kubeletLines)...)
	}
	out, err := kubeletLog(ctx, e.Node, e.Time.Add(-kubeletLookBack), e.Time.Add(2*time.Second), "short-iso-precise")
	if err != nil {
		record = append(record, "(the kubelet's log could not be read: "+err.Error()+")")
	} else {
		record = append(record, linesNaming(out, e.Namespace+"/"+e.Pod, kubeletLines)...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[i].Kubelet = record
}

// podEventLines are the last n of the events of the object uid that
// happened by until, oldest first, each "event 15:04:05 Reason (xN) by
// who: message".
func podEventLines(events []corev1.Event, uid types.UID, until time.Time, n int) []string {
	at := func(ev corev1.Event) time.Time {
		for _, t := range []time.Time{ev.LastTimestamp.Time, ev.EventTime.Time, ev.FirstTimestamp.Time} {
			if !t.IsZero() {
				return t
			}
		}
		return ev.CreationTimestamp.Time
	}
	sort.SliceStable(events, func(i, j int) bool { return at(events[i]).Before(at(events[j])) })
	var out []string
	for _, ev := range events {
		if ev.InvolvedObject.UID != uid || at(ev).After(until) {
			continue
		}
		count := ""
		if ev.Count > 1 {
			count = fmt.Sprintf(" (x%d)", ev.Count)
		}
		by := ev.Source.Component
		if by == "" {
			by = ev.ReportingController
		}
		out = append(out, fmt.Sprintf("event %s %s%s by %s: %s", at(ev).UTC().Format(time.TimeOnly), ev.Reason, count, by, cut(ev.Message)))
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// linesNaming are the last n lines of log that name the Pod key
// (namespace/name, as klog writes pod="ns/name").
func linesNaming(log, key string, n int) []string {
	lines := lastLines(log, n, func(l string) bool { return strings.Contains(l, `"`+key+`"`) })
	for i := range lines {
		lines[i] = "kubelet: " + lines[i]
	}
	return lines
}

// lastLines are the last n lines of log that keep says to keep, each cut
// to a length a report can show.
func lastLines(log string, n int, keep func(string) bool) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if keep(l) {
			out = append(out, cut(l))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// cut shortens a line to what a report can show.
func cut(l string) string {
	if len(l) > 400 {
		return l[:400] + "..."
	}
	return l
}
