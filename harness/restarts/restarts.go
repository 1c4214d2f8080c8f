// Package restarts watches every Pod of a cluster for containers that
// start again - a crash, an OOM kill, a liveness failure, a component
// killed from outside - so a run can tell the restarts a step meant (a
// rollout restarting the control plane) from the ones nothing meant.
package restarts

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Restart is one container that started again, as its kubelet reported it.
type Restart struct {
	// Time is when the previous instance ended (its terminated state's
	// finishedAt), else when the restart was seen.
	Time      time.Time `json:"time"`
	Phase     string    `json:"phase"`
	Node      string    `json:"node"`
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	Container string    `json:"container"`
	// Count is the container's restart count after it.
	Count    int32  `json:"count"`
	ExitCode int32  `json:"exitCode"`
	Reason   string `json:"reason,omitempty"` // Error, OOMKilled, Completed, ...
	// Logs are the last lines the previous instance wrote.
	Logs []string `json:"logs,omitempty"`
}

func (r Restart) String() string {
	return fmt.Sprintf("%s %s/%s container %s on %s restarted (count %d, exit code %d %s) in phase %q",
		r.Time.UTC().Format(time.RFC3339), r.Namespace, r.Pod, r.Container, r.Node, r.Count, r.ExitCode, r.Reason, r.Phase)
}

// logLines is how many of a restarted container's last lines are kept.
const logLines = 5

// Monitor keeps the restarts it has seen since Start.
type Monitor struct {
	cs     kubernetes.Interface
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	phase  string
	seen   []Restart
	wg     sync.WaitGroup
	logCtx context.Context
}

// Start watches every Pod through cs (an informer: it relists and
// rewatches across apiserver restarts, and a relist still shows a restart
// count that rose while the watch was down). Restarts before Start are
// not counted.
func Start(ctx context.Context, cs kubernetes.Interface) (*Monitor, error) {
	m := &Monitor{cs: cs, stop: make(chan struct{}), phase: "start", logCtx: context.WithoutCancel(ctx)}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.Pod)
			after, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 {
				m.compare(before, after)
			}
		},
	}); err != nil {
		return nil, err
	}
	factory.Start(m.stop)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			m.Stop()
			return nil, fmt.Errorf("the watch of %v did not sync: %v", typ, ctx.Err())
		}
	}
	return m, nil
}

// Phase names the phase the restarts seen from now on belong to.
func (m *Monitor) Phase(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phase = name
}

// Stop ends the watch and returns every restart seen, in time order.
func (m *Monitor) Stop() []Restart {
	m.once.Do(func() { close(m.stop) })
	m.wg.Wait() // the log reads under way
	return m.Restarts()
}

// Restarts are the restarts seen so far, in time order.
func (m *Monitor) Restarts() []Restart {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]Restart(nil), m.seen...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// compare records every container of after whose restart count rose
// since before: init containers (native sidecars among them) too.
func (m *Monitor) compare(before, after *corev1.Pod) {
	if before.UID != after.UID {
		return // a new Pod under the same name starts from zero
	}
	counts := map[string]int32{}
	for _, st := range append(append([]corev1.ContainerStatus{}, before.Status.InitContainerStatuses...), before.Status.ContainerStatuses...) {
		counts[st.Name] = st.RestartCount
	}
	for _, st := range append(append([]corev1.ContainerStatus{}, after.Status.InitContainerStatuses...), after.Status.ContainerStatuses...) {
		if st.RestartCount <= counts[st.Name] {
			continue
		}
		r := Restart{Time: time.Now(), Node: after.Spec.NodeName, Namespace: after.Namespace, Pod: after.Name,
			Container: st.Name, Count: st.RestartCount}
		if t := st.LastTerminationState.Terminated; t != nil {
			r.ExitCode, r.Reason = t.ExitCode, t.Reason
			if !t.FinishedAt.IsZero() {
				r.Time = t.FinishedAt.Time
			}
		}
		m.mu.Lock()
		r.Phase = m.phase
		m.seen = append(m.seen, r)
		i := len(m.seen) - 1
		m.mu.Unlock()
		m.wg.Add(1)
		go m.readLogs(i, r)
	}
}

// readLogs keeps the last lines the restarted container's previous
// instance wrote, read at once: the Pod may be gone later.
func (m *Monitor) readLogs(i int, r Restart) {
	defer m.wg.Done()
	ctx, cancel := context.WithTimeout(m.logCtx, 10*time.Second)
	defer cancel()
	tail := int64(logLines)
	raw, err := m.cs.CoreV1().Pods(r.Namespace).GetLogs(r.Pod, &corev1.PodLogOptions{Container: r.Container, Previous: true, TailLines: &tail}).DoRaw(ctx)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if err != nil {
		lines = []string{"(the previous instance's log could not be read: " + err.Error() + ")"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[i].Logs = lines
}
