package sidecarchecks

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// slot is the extended resource the scheduling check gives a node, so
// the node's free capacity is the check's own: the other checks' Pods
// running beside it request CPU and memory, never slots, and an extended
// resource is counted by the scheduler with the same formula.
const slot corev1.ResourceName = "skewer.io/slot"

// slotsFree is what the node is given: the legacy Pod's formula, one
// less than the native Pod's (sizedCases' shape in slots: a proxy 1, a
// setup init container 5, an app 2; native max(1+5, 2+1) = 6, legacy
// max(5, 2+1) = 5).
const slotsFree = 5

// CheckScheduling judges sidecar.resources.scheduling on every kubelet at
// once: given a node whose free capacity fits the legacy Pod's requests
// but not the native one's (by KEP-753's formula), the scheduler leaves
// the native Pod Pending with its reason, never binding it to the
// over-committed node, and binds the legacy Pod there.
func (s *Sidecars) CheckScheduling(ctx context.Context) promise.Verdict {
	return s.onEachAtOnce(ctx, "sidecar.resources.scheduling", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		undo, err := s.giveSlots(ctx, k.Name)
		if err != nil {
			return nil, err
		}
		defer undo()
		native, err := s.cs.CoreV1().Pods(ns).Create(ctx, s.slotPod(ns, k.Name, true), metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		pending, err := s.waitPod(ctx, "certify/sidecar-pod", ns, native.Name, "unschedulable", unschedulable)
		if err != nil {
			return nil, err
		}
		if err := s.cs.CoreV1().Pods(ns).Delete(ctx, native.Name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		if err := s.waitGone(ctx, ns, native.Name, time.Minute); err != nil {
			return nil, err
		}
		legacy, err := s.cs.CoreV1().Pods(ns).Create(ctx, s.slotPod(ns, k.Name, false), metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		bound, err := s.waitPod(ctx, "certify/sidecar-pod", ns, legacy.Name, "scheduled", scheduledPod)
		if err != nil {
			return nil, err
		}
		return judgeScheduling(k.Name, pending, bound)
	})
}

// giveSlots gives node slotsFree slots, capacity and allocatable, and
// returns what takes them away again.
func (s *Sidecars) giveSlots(ctx context.Context, node string) (func(), error) {
	path := "/status/%s/" + strings.ReplaceAll(string(slot), "/", "~1")
	patch := func(ctx context.Context, op string) error {
		var ops []string
		for _, field := range []string{"capacity", "allocatable"} {
			value := ""
			if op == "add" {
				value = fmt.Sprintf(`,"value":"%d"`, slotsFree)
			}
			ops = append(ops, fmt.Sprintf(`{"op":%q,"path":%q%s}`, op, fmt.Sprintf(path, field), value))
		}
		_, err := s.cs.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), metav1.PatchOptions{}, "status")
		return err
	}
	if err := patch(ctx, "add"); err != nil {
		return nil, fmt.Errorf("give node %s %d %s: %w", node, slotsFree, slot, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = patch(ctx, "remove")
	}, nil
}

// slotPod is sizedCases' shape in slots, on node: native (the proxy a
// native sidecar before setup) or legacy (the proxy beside the app).
func (s *Sidecars) slotPod(ns, node string, withSidecar bool) *corev1.Pod {
	name := "legacy"
	if withSidecar {
		name = "native"
	}
	b := podBuilder{image: s.image, ns: ns, name: name, node: node}
	sized := func(c corev1.Container, n int64) corev1.Container {
		q := corev1.ResourceList{slot: *resource.NewQuantity(n, resource.DecimalSI)}
		c.Resources.Requests, c.Resources.Limits = q, q.DeepCopy()
		return c
	}
	proxy := sized(b.container("proxy", "proxy", "-load-after", "0s"), 1)
	setup := sized(b.container("setup", "app", "-exit-after", "1s"), 5)
	app := sized(b.container("app", "app"), 2)
	if withSidecar {
		return b.pod([]corev1.Container{native(proxy), setup}, []corev1.Container{app})
	}
	return b.pod([]corev1.Container{setup}, []corev1.Container{app, proxy})
}

// unschedulable says whether the scheduler has said it cannot place p.
func unschedulable(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodScheduled)
	return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
}

// scheduledPod says whether the scheduler has bound p.
func scheduledPod(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodScheduled)
	return p.Spec.NodeName != "" && c != nil && c.Status == corev1.ConditionTrue
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// judgeScheduling judges sidecar.resources.scheduling on node: the
// native Pod as last seen Pending, never bound, for want of slots (the
// scheduler's own message names the resource), and the legacy Pod bound
// to node.
func judgeScheduling(node string, pending, bound *corev1.Pod) ([]string, error) {
	c := podCondition(pending, corev1.PodScheduled)
	switch {
	case pending.Spec.NodeName != "":
		return nil, fmt.Errorf("the native Pod, %d slots by the formula, was bound to %s, which has %d: the node is over-committed", slotsFree+1, pending.Spec.NodeName, slotsFree)
	case c == nil || !strings.Contains(c.Message, "Insufficient "+string(slot)):
		return nil, fmt.Errorf("the native Pod is Pending, but not for want of %s: %+v", slot, c)
	case bound.Spec.NodeName != node:
		return nil, fmt.Errorf("the legacy Pod, %d slots, was bound to %q, not to %s where they fit", slotsFree, bound.Spec.NodeName, node)
	}
	return []string{fmt.Sprintf("given %d %s: the native Pod (%d by the formula) Pending, %q; the legacy Pod (%d) bound to %s",
		slotsFree, slot, slotsFree+1, c.Message, slotsFree, node)}, nil
}
