// Package restarts watches a cluster for what nothing should do unasked:
// a container that starts again (a crash, an OOM kill, a liveness
// failure, a component killed from outside), a kubelet or containerd
// that restarts, a node that stops being Ready, a Pod the kubelet evicts,
// a container the kernel kills for memory. A run tells the events a step
// meant (a rollout restarting the control plane, a fault killing an
// apiserver) from the ones nothing meant with Meant and Check.
package restarts

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The kinds of Event.
const (
	// Container: a container of a Pod started again (its restart count rose).
	Container = "container"
	// Kubelet and Containerd: the node's systemd started the unit again
	// after the node had been Ready.
	Kubelet    = "kubelet"
	Containerd = "containerd"
	// NotReady: a node's Ready condition left True.
	NotReady = "not-ready"
	// Evicted: the kubelet evicted a Pod (node pressure, or a Pod past its
	// local storage limits).
	Evicted = "evicted"
	// OOMKilled: a container the kernel killed for memory that was not
	// started again (a Pod that does not restart it); one that was is a
	// Container event with reason OOMKilled.
	OOMKilled = "oom-killed"
)

// Event is one thing the monitor saw happen.
type Event struct {
	Kind string `json:"kind"`
	// Time is when it happened: when the previous instance ended (a
	// terminated state's finishedAt) or, with no last state reported, the
	// new one started; when the unit started again, the condition
	// changed; else when the monitor saw it.
	Time  time.Time `json:"time"`
	Phase string    `json:"phase"`
	Node  string    `json:"node"`
	// ControlPlaneNode says the node is a control plane (kubeadm's role
	// label), which a rollout or a control-plane fault acts on.
	ControlPlaneNode bool   `json:"controlPlaneNode,omitempty"`
	Namespace        string `json:"namespace,omitempty"`
	Pod              string `json:"pod,omitempty"`
	// Container is the container's name, or the unit (kubelet,
	// containerd) for a unit's restart.
	Container string `json:"container,omitempty"`
	// PodCreated is when the container's Pod was made: a step that made
	// a Pod whose container it declared crashes means it whenever it does.
	PodCreated time.Time `json:"podCreated,omitzero"`
	// Count is the container's restart count after it.
	Count    int32 `json:"count,omitempty"`
	ExitCode int32 `json:"exitCode,omitempty"`
	// Reason is the kubelet's or systemd's word for how it ended: Error,
	// OOMKilled, StartError, killed, exited, KubeletNotReady, ...
	Reason string `json:"reason,omitempty"`
	// Message is the condition's, the eviction's or, for a container, the
	// runtime's word on its end (a StartError's error).
	Message string `json:"message,omitempty"`
	// NoLastState says how a container restart the kubelet reported
	// without its last state was timed (the new instance's start, or when
	// seen); its exit code and reason are then unknown.
	NoLastState string `json:"noLastState,omitempty"`
	// NeverStarted says the previous instance was created and never
	// started: the kubelet reports such an instance as the last state,
	// waiting, and starts another in its place (a start that failed
	// before the runtime ran it, or a create that finished after the
	// kubelet had given up on it).
	NeverStarted bool `json:"neverStarted,omitempty"`
	// Logs are the last lines the previous instance wrote; for a node
	// that left Ready, its kubelet's last error lines.
	Logs []string `json:"logs,omitempty"`
	// Kubelet is, for a container restart reported without its last
	// state, what the kubelet said of the Pod up to it: its events for
	// the Pod and its log lines naming it.
	Kubelet []string `json:"kubelet,omitempty"`
	// Connections are, for a node that left Ready, the apiservers its
	// connections through the load balancer were on then ("NODE since
	// 15:04:05"), read from the load balancer's log.
	Connections []string `json:"connections,omitempty"`
}

func (e Event) String() string {
	at := e.Time.UTC().Format(time.RFC3339)
	var what string
	switch e.Kind {
	case Kubelet, Containerd:
		how := fmt.Sprintf("its process ended: %s, status %d", e.Reason, e.ExitCode)
		if e.Reason == "stopped" {
			how = "it was stopped"
		}
		what = fmt.Sprintf("%s on %s started again (%s)", e.Container, e.Node, how)
	case NotReady:
		what = fmt.Sprintf("node %s not Ready (%s: %s)", e.Node, e.Reason, e.Message)
	case Evicted:
		what = fmt.Sprintf("%s/%s on %s evicted by its kubelet (%s)", e.Namespace, e.Pod, e.Node, e.Message)
	case OOMKilled:
		what = fmt.Sprintf("%s/%s container %s on %s killed for memory (exit code %d)", e.Namespace, e.Pod, e.Container, e.Node, e.ExitCode)
	default:
		how := fmt.Sprintf("exit code %d %s", e.ExitCode, e.Reason)
		switch {
		case e.NeverStarted:
			how = "its previous instance was created and never started; " + e.NoLastState
		case e.NoLastState != "":
			how = "the kubelet reported no last state; " + e.NoLastState
		case e.Message != "":
			how += ": " + e.Message
		}
		what = fmt.Sprintf("%s/%s container %s on %s restarted (count %d, %s)", e.Namespace, e.Pod, e.Container, e.Node, e.Count, how)
	}
	return fmt.Sprintf("%s %s in phase %q", at, what, e.Phase)
}

// logLines is how many of a restarted component's last lines are kept.
const logLines = 5

// Monitor keeps the events it has seen since Start.
type Monitor struct {
	cs     kubernetes.Interface
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	phase  string
	seen   []Event
	wg     sync.WaitGroup
	logCtx context.Context
	// journals follow each Ready node's systemd journal; cancelled by Stop.
	journals      context.Context
	stopJournals  context.CancelFunc
	followed      map[string]bool
	controlPlanes map[string]bool
	evicted       map[types.UID]bool // Pods recorded as evicted, by either sign
	started       time.Time
	exits         map[string]exit
	journalErrors []string
}

// Start watches every Pod and Node through cs (informers: they relist and
// rewatch across apiserver restarts, and a relist still shows a restart
// count that rose while the watch was down), the kubelets' Evicted
// events, and the kubelet and containerd units of every node once it is
// Ready. Events before Start are not counted.
func Start(ctx context.Context, cs kubernetes.Interface) (*Monitor, error) {
	m := &Monitor{cs: cs, stop: make(chan struct{}), phase: "start", logCtx: context.WithoutCancel(ctx),
		followed: map[string]bool{}, controlPlanes: map[string]bool{}, evicted: map[types.UID]bool{}, exits: map[string]exit{},
		started: time.Now()}
	m.journals, m.stopJournals = context.WithCancel(context.WithoutCancel(ctx))
	factory := informers.NewSharedInformerFactory(cs, 0)
	// A Pod the kubelet evicts whose containers exit 0 on SIGTERM ends
	// Succeeded, with no trace of the eviction in its status
	// (kubernetes#120182, #141483): the kubelet's Evicted event is the
	// sign that is always there.
	evictions := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "reason=Evicted"
	}))
	if err := m.watch(factory, evictions); err != nil {
		m.Stop()
		return nil, err
	}
	for _, f := range []informers.SharedInformerFactory{factory, evictions} {
		f.Start(m.stop)
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				m.Stop()
				return nil, fmt.Errorf("the watch of %v did not sync: %v", typ, ctx.Err())
			}
		}
	}
	return m, nil
}

// watch hands the monitor every Pod's and Node's updates (a new Node
// too) from factory, and every kubelet's Evicted event from evictions.
func (m *Monitor) watch(factory, evictions informers.SharedInformerFactory) error {
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.Pod)
			after, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 {
				m.comparePods(before, after)
			}
		},
	}); err != nil {
		return err
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			m.role(n)
			if ready(n) != nil && ready(n).Status == corev1.ConditionTrue {
				m.follow(n.Name, time.Now())
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*corev1.Node)
			after, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 {
				m.role(after)
				m.compareNodes(before, after)
			}
		},
	}); err != nil {
		return err
	}
	_, err := evictions.Core().V1().Events().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ev, ok := obj.(*corev1.Event); ok {
				m.evictionEvent(ev)
			}
		},
	})
	return err
}

// evictionEvent records the Pod a kubelet's Evicted event names, once,
// unless the event is older than the monitor.
func (m *Monitor) evictionEvent(ev *corev1.Event) {
	if ev.InvolvedObject.Kind != "Pod" || ev.Source.Component != "kubelet" && ev.ReportingController != "kubelet" {
		return
	}
	at := ev.LastTimestamp.Time
	if at.IsZero() {
		at = ev.EventTime.Time
	}
	if at.IsZero() || at.Before(m.started.Truncate(time.Second)) {
		return
	}
	node := ev.Source.Host
	if node == "" {
		node = ev.ReportingInstance
	}
	m.addEviction(ev.InvolvedObject.UID, Event{Kind: Evicted, Time: at, Node: node, Namespace: ev.InvolvedObject.Namespace,
		Pod: ev.InvolvedObject.Name, Reason: ev.Reason, Message: ev.Message})
}

// addEviction records the eviction of the Pod uid once, whichever sign
// of it (its status, the kubelet's event) comes first.
func (m *Monitor) addEviction(uid types.UID, e Event) {
	m.mu.Lock()
	seen := m.evicted[uid]
	m.evicted[uid] = true
	m.mu.Unlock()
	if !seen {
		m.add(e)
	}
}

// Phase names the phase the events seen from now on belong to.
func (m *Monitor) Phase(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phase = name
}

// Stop ends the watches and returns every event seen, in time order.
func (m *Monitor) Stop() []Event {
	m.once.Do(func() {
		close(m.stop)
		m.mu.Lock() // no goroutine is added after this (spawn)
		m.stopJournals()
		m.mu.Unlock()
	})
	m.wg.Wait() // the log reads and journal followers under way
	return m.Events()
}

// Events are the events seen so far, in time order.
func (m *Monitor) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append([]Event(nil), m.seen...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// Gaps says where the monitor could not look: a node's journal that could
// not be followed. A run reports them; they are not events.
func (m *Monitor) Gaps() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.journalErrors...)
}

// controlPlaneRole is the label kubeadm gives a control-plane node.
const controlPlaneRole = "node-role.kubernetes.io/control-plane"

// role remembers whether n is a control plane.
func (m *Monitor) role(n *corev1.Node) {
	_, cp := n.Labels[controlPlaneRole]
	m.mu.Lock()
	defer m.mu.Unlock()
	m.controlPlanes[n.Name] = cp
}

// add records e in the current phase and returns its index.
func (m *Monitor) add(e Event) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.Phase = m.phase
	e.ControlPlaneNode = m.controlPlanes[e.Node]
	m.seen = append(m.seen, e)
	return len(m.seen) - 1
}

// spawn runs fn in a goroutine Stop waits for, unless Stop has begun.
func (m *Monitor) spawn(fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.journals.Err() != nil {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
}

// setLogs attaches the last lines read for event i.
func (m *Monitor) setLogs(i int, lines []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[i].Logs = lines
}

// setConnections attaches what the load balancer says of event i's node.
func (m *Monitor) setConnections(i int, conns []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[i].Connections = conns
}
