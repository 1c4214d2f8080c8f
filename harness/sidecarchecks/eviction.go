package sidecarchecks

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// The eviction check's two Pods on a node under memory pressure, each
// holding its memory in a container named HoggingSidecar. The greedy Pod
// asks for evictionAppRequest and takes greedyTakes; the covered Pod's app
// asks for evictionAppRequest too, and its native sidecar asks for
// coveredSidecarRequest and takes coveredTakes. By the sidecar formula
// the covered Pod's request is their sum, above what it takes: the
// kubelet ranks the greedy Pod first (usage over request, then priority,
// then usage minus request). Were the sidecar's request left out, the
// covered Pod would be the further over its request (coveredTakes -
// evictionAppRequest > greedyTakes - evictionAppRequest) and go first.
//
// The node's eviction threshold is set evictionBelow under the memory it
// had available before the Pods: the two together take some 300 MiB
// more, so the threshold is crossed; the greedy Pod's eviction gives back
// greedyTakes, leaving the node some 100 MiB above it, so the covered Pod
// has no cause to go.
const (
	evictionAppRequest    = 16 << 20
	greedyTakes           = 400 << 20
	coveredTakes          = 500 << 20
	coveredSidecarRequest = 520 << 20
	evictionBelow         = 650 << 20
	evictionStep          = 20 << 20
	kubeletConfig         = "/var/lib/kubelet/config.yaml"
)

// EvictionSeen is what one node showed under memory pressure: the Pod
// the kubelet evicted first and its message, whether it evicted the
// covered Pod too, and the covered Pod's memory as the kubelet last
// reported it, beside its request by the formula and its app's alone.
type EvictionSeen struct {
	First, Message               string
	CoveredEvicted               bool
	CoveredUsage, CoveredRequest int64
	AppRequest                   int64
}

// CheckEvictionOrder judges sidecar.eviction.order on every kubelet at
// once: under memory pressure the kubelet evicts first the Pod whose
// usage exceeds its request, not the one whose native sidecar's request
// covers its usage. Each node's eviction threshold is raised for the
// check and restored after it (the kubelet restarted both times).
func (s *Sidecars) CheckEvictionOrder(ctx context.Context) promise.Verdict {
	return s.onEachAtOnce(ctx, "sidecar.eviction.order", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		if err := s.quietNode(ctx, k.Name); err != nil {
			return nil, err
		}
		available, err := s.memoryAvailable(ctx, k.Name)
		if err != nil {
			return nil, err
		}
		restore, err := s.evictBelow(ctx, k, available-evictionBelow)
		if err != nil {
			return nil, err
		}
		defer restore()
		if err := s.quietNode(ctx, k.Name); err != nil {
			return nil, err
		}
		seen, err := s.underPressure(ctx, ns, k)
		if err != nil {
			return nil, err
		}
		return judgeEvictionOrder(seen)
	})
}

// memoryAvailable is the memory the kubelet reports available on node
// (its summary API, the number its eviction manager compares).
func (s *Sidecars) memoryAvailable(ctx context.Context, node string) (int64, error) {
	sum, err := s.summary(ctx, node)
	if err != nil {
		return 0, fmt.Errorf("the kubelet's summary on %s: %w", node, err)
	}
	if sum.Node.Memory.AvailableBytes == nil {
		return 0, fmt.Errorf("the kubelet's summary on %s has no memory available", node)
	}
	return *sum.Node.Memory.AvailableBytes, nil
}

// evictBelow sets k's kubelet to evict when available memory falls below
// bytes, the pressure condition let go of 5 s after, and restarts it;
// restore puts its configuration back and restarts it again.
func (s *Sidecars) evictBelow(ctx context.Context, k Kubelet, bytes int64) (restore func(), err error) {
	orig, err := k.ReadFile(ctx, kubeletConfig)
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(orig, &cfg); err != nil {
		return nil, fmt.Errorf("the kubelet configuration of %s: %w", k.Name, err)
	}
	cfg["evictionHard"] = map[string]string{"memory.available": strconv.FormatInt(bytes>>20, 10) + "Mi"}
	cfg["evictionPressureTransitionPeriod"] = "5s"
	changed, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	v, err := version.Parse(k.Version)
	if err != nil {
		return nil, err
	}
	restart := func(ctx context.Context, data []byte) error {
		if err := k.WriteFile(ctx, kubeletConfig, data, 0o644); err != nil {
			return err
		}
		if _, err := k.Run(ctx, "systemctl", "restart", "kubelet"); err != nil {
			return err
		}
		return rollout.WaitReady(ctx, s.c, "certify/sidecar-pod", k.Name, v)
	}
	restore = func() { _ = restart(context.WithoutCancel(ctx), orig) }
	if err := restart(ctx, changed); err != nil {
		restore()
		return nil, fmt.Errorf("the kubelet of %s with an eviction threshold: %w", k.Name, err)
	}
	return restore, nil
}

// evictionPods are the greedy and the covered Pod.
func (s *Sidecars) evictionPods(ns string, k Kubelet) (greedy, covered *corev1.Pod) {
	hog := func(b podBuilder, takes, request int64) corev1.Container {
		c := b.container(HoggingSidecar, "hog", "-step", strconv.Itoa(evictionStep), "-every", "100ms", "-limit", strconv.FormatInt(takes, 10))
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(request, resource.BinarySI)}
		return c
	}
	app := func(b podBuilder) corev1.Container {
		c := b.container("app", "app")
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(evictionAppRequest, resource.BinarySI)}
		return c
	}
	gb := podBuilder{image: s.image, ns: ns, name: "greedy", node: k.Name}
	cb := podBuilder{image: s.image, ns: ns, name: "covered", node: k.Name}
	greedy = gb.pod(nil, []corev1.Container{hog(gb, greedyTakes, evictionAppRequest)})
	covered = cb.pod([]corev1.Container{native(hog(cb, coveredTakes, coveredSidecarRequest))}, []corev1.Container{app(cb)})
	return greedy, covered
}

// evictionSettle is how long the check watches after the first eviction
// for a second: the eviction manager looks every 10 s.
const evictionSettle = 15 * time.Second

// underPressure runs the two Pods on k until the kubelet evicts one, and
// watches evictionSettle more; the covered Pod's memory is read from the
// kubelet's summary meanwhile.
func (s *Sidecars) underPressure(ctx context.Context, ns string, k Kubelet) (EvictionSeen, error) {
	greedy, covered := s.evictionPods(ns, k)
	seen := EvictionSeen{AppRequest: evictionAppRequest, CoveredRequest: evictionAppRequest + coveredSidecarRequest}
	for _, p := range []*corev1.Pod{greedy, covered} {
		if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return seen, err
		}
	}
	var firstAt time.Time
	err := wait.For(ctx, "certify/sidecar-pod", "an eviction on "+k.Name, func(ctx context.Context) (bool, string, error) {
		if seen.CoveredUsage < coveredTakes {
			if usage, err := s.podMemory(ctx, k.Name, ns, covered.Name); err == nil && usage > seen.CoveredUsage {
				seen.CoveredUsage = usage
			}
		}
		pods, err := s.podsOn(ctx, k.Name)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods {
			message, evicted := evictedBy(&p)
			if !evicted {
				continue
			}
			name := p.Name
			if p.Namespace != ns {
				name = p.Namespace + "/" + p.Name
			}
			if seen.First == "" {
				seen.First, seen.Message, firstAt = name, message, time.Now()
			}
			seen.CoveredEvicted = seen.CoveredEvicted || name == covered.Name
		}
		return seen.First != "" && time.Since(firstAt) >= evictionSettle, fmt.Sprintf("first evicted %q; the covered Pod at %d MiB", seen.First, seen.CoveredUsage>>20), nil
	})
	if err != nil && seen.First == "" {
		return seen, unjudged("no Pod was evicted on %s: the memory pressure the check sets up never came (%v)", k.Name, err)
	}
	return seen, err
}

// evictedBy says whether the kubelet evicted p, and its message: the
// v1.35 kubelet sets the Pod's reason Evicted; the v1.36 one was seen
// (2026-12-07) to leave it unset, its Pod "Completed", with the
// DisruptionTarget condition (TerminationByKubelet) saying why.
func evictedBy(p *corev1.Pod) (string, bool) {
	if p.Status.Reason == "Evicted" {
		return p.Status.Message, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet" {
			return c.Message, true
		}
	}
	return "", false
}

// quietNode waits until node runs nothing but the cluster's own Pods
// (kube-system's) and its kubelet, restarted, reports the memory of each.
// Any other Pod there under the pressure could be evicted in the check's
// place: a full certification (2026-12-07) saw the v1.35 kubelet evict
// three BestEffort Pods of the worker's replacement ahead of the greedy
// one - each over its request of 0, while the greedy Pod's memory, taken
// within the seconds before, was most likely not yet in the kubelet's
// stats, so that it looked within its request - and the checks they
// belonged to failed for it. The other sidecar checks' namespaces are
// being deleted as this one starts. And a Pod the kubelet has no stats of
// it ranks first (eviction/helpers.go, exceedMemoryRequests).
func (s *Sidecars) quietNode(ctx context.Context, node string) error {
	return wait.For(ctx, "certify/sidecar-pod", "node "+node+" running only kube-system's Pods, the memory of each reported", func(ctx context.Context) (bool, string, error) {
		pods, err := s.podsOn(ctx, node)
		if err != nil {
			return false, err.Error(), nil
		}
		sum, err := s.summary(ctx, node)
		if err != nil {
			return false, err.Error(), nil
		}
		reported := map[string]bool{}
		for _, p := range sum.Pods {
			reported[p.PodRef.Namespace+"/"+p.PodRef.Name] = p.Memory.WorkingSetBytes != nil
		}
		for _, p := range pods {
			switch {
			case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
			case p.Namespace != metav1.NamespaceSystem:
				return false, "still there: " + p.Namespace + "/" + p.Name, nil
			case !reported[p.Namespace+"/"+p.Name]:
				return false, "no memory reported of " + p.Namespace + "/" + p.Name, nil
			}
		}
		return true, "", nil
	})
}

// podsOn are the Pods bound to node, of every namespace.
func (s *Sidecars) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	pods, err := s.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// summary is node's kubelet's summary of its Pods' memory.
func (s *Sidecars) summary(ctx context.Context, node string) (podSummary, error) {
	var sum podSummary
	raw, err := s.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "stats", "summary").DoRaw(ctx)
	if err != nil {
		return sum, err
	}
	return sum, json.Unmarshal(raw, &sum)
}

// podSummary is what the eviction check reads of a kubelet's summary:
// the node's memory available and each Pod's working set.
type podSummary struct {
	Node struct {
		Memory struct {
			AvailableBytes *int64 `json:"availableBytes"`
		} `json:"memory"`
	} `json:"node"`
	Pods []struct {
		PodRef struct{ Name, Namespace string } `json:"podRef"`
		Memory struct {
			WorkingSetBytes *int64 `json:"workingSetBytes"`
		} `json:"memory"`
	} `json:"pods"`
}

// podMemory is the working set of Pod ns/name as node's kubelet reports it.
func (s *Sidecars) podMemory(ctx context.Context, node, ns, name string) (int64, error) {
	sum, err := s.summary(ctx, node)
	if err != nil {
		return 0, err
	}
	for _, p := range sum.Pods {
		if p.PodRef.Name == name && p.PodRef.Namespace == ns && p.Memory.WorkingSetBytes != nil {
			return *p.Memory.WorkingSetBytes, nil
		}
	}
	return 0, nil
}

// judgeEvictionOrder judges one node: the greedy Pod went first, the
// covered one not at all. Floor: the covered Pod was seen using more than
// its app's request - else ranking it first would not show its sidecar's
// request left out.
func judgeEvictionOrder(seen EvictionSeen) ([]string, error) {
	switch {
	case seen.CoveredUsage <= seen.AppRequest:
		return nil, unjudged("the covered Pod was never seen using more than its app's request (%d MiB): it would not be ranked first even with its sidecar's request left out", seen.AppRequest>>20)
	case seen.First != "greedy" && seen.First != "covered":
		return nil, unjudged("the kubelet evicted %s first (%s), not one of the check's two Pods: the pressure was not theirs alone, and says nothing of their order", seen.First, seen.Message)
	case seen.First != "greedy":
		return nil, fmt.Errorf("the kubelet evicted the %s Pod first (%s), though its usage %d MiB was within its request by the sidecar formula (%d MiB): its native sidecar's request was not counted",
			seen.First, seen.Message, seen.CoveredUsage>>20, seen.CoveredRequest>>20)
	case seen.CoveredEvicted:
		return nil, fmt.Errorf("after the greedy Pod the kubelet evicted the covered Pod too, within %s: its usage %d MiB was within its request (%d MiB)", evictionSettle, seen.CoveredUsage>>20, seen.CoveredRequest>>20)
	}
	return []string{fmt.Sprintf("the greedy Pod evicted first (%s); the covered Pod, at %d MiB - over its app's request of %d MiB, within the %d MiB its native sidecar adds by the formula - kept through %s more",
		seen.Message, seen.CoveredUsage>>20, seen.AppRequest>>20, seen.CoveredRequest>>20, evictionSettle)}, nil
}

// JudgeEvictionOrder is sidecar.eviction.order on what each node showed.
func JudgeEvictionOrder(kubelets []Kubelet, seen map[string]EvictionSeen) promise.Verdict {
	return perKubelet(kubelets, "sidecar.eviction.order", func(k Kubelet) ([]string, error) {
		return judgeEvictionOrder(seen[k.Name])
	})
}
