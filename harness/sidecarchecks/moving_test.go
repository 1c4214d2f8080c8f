package sidecarchecks

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
)

// movedBatch is a batch the drain of w1 caught in flight with one native
// Pod there, which it moved and accounted for, ending native on w2.
func movedBatch() MovedBatch {
	native := func(name, node string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
			Spec: corev1.PodSpec{NodeName: node, InitContainers: []corev1.Container{{Name: "log-agent"}, {Name: "proxy"}}, Containers: []corev1.Container{{Name: "app"}}}}
	}
	evicted := native("moving-n1", "w1")
	return MovedBatch{Began: t0, Drained: t0.Add(6 * time.Second), Old: "w1", New: "w2",
		OnOld: []corev1.Pod{evicted},
		Stops: []PodStop{{Pod: "moving-n1", Line: "grace 30s: SIGTERM to the app, ... lost 0"}},
		Results: []sidecar.BatchResult{{Targets: []sidecar.Target{{Namespace: "ns", Name: movingName}}, Took: 40 * time.Second,
			Unavailable: sidecar.Unavailable{Replicas: 1, Of: 2}, Moved: []corev1.Pod{evicted}}},
		After: []corev1.Pod{native("moving-n2", "w2"), native("moving-n3", "w2")}}
}

// The batch is judged on what the drain did to it, and fails on each way
// it can go wrong; a drain that missed it judges nothing.
func TestJudgeNodeReplaced(t *testing.T) {
	ev, err := judgeNodeReplaced(movedBatch())
	if err != nil || !strings.Contains(strings.Join(ev, "\n"), "accounted for those that moved: [moving-n1]") {
		t.Fatalf("a batch moved and accounted for: %v\n%s", err, strings.Join(ev, "\n"))
	}
	for name, c := range map[string]struct {
		change func(b *MovedBatch)
		want   string
	}{
		"breached":          {func(b *MovedBatch) { b.Results[0].Breach = "MaxUnavailable 1 breached: 2 of 2" }, "breached its stop conditions across the drain"},
		"not accounted for": {func(b *MovedBatch) { b.Results[0].Moved = nil }, "did not account for its Pod moving-n1"},
		"lines lost":        {func(b *MovedBatch) { b.Stops[0].Lost = 3 }, "3 lines lost"},
		"stopped out of order": {func(b *MovedBatch) { b.Stops[0].Err = errors.New("a sidecar was told to stop before the app") },
			"told to stop before the app"},
		"not judged":        {func(b *MovedBatch) { b.Stops = nil }, "0 of the 1 native Pods"},
		"left on the old":   {func(b *MovedBatch) { b.After[1].Spec.NodeName = "w1" }, "runs on w1"},
		"left legacy":       {func(b *MovedBatch) { b.After[0].Spec.InitContainers = nil }, "want native on w2"},
		"none after":        {func(b *MovedBatch) { b.After = nil }, "none of its Pods runs"},
		"the migration":     {func(b *MovedBatch) { b.Err = errors.New("failed to migrate") }, "failed to migrate"},
		"not in flight yet": {func(b *MovedBatch) { b.Failed = errors.New("the migration ended before a native Pod ran on w1") }, "ended before"},
	} {
		b := movedBatch()
		c.change(&b)
		if _, err := judgeNodeReplaced(b); err == nil || errors.Is(err, errNotInFlight) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a failure saying %q", name, err, c.want)
		}
	}
	for name, change := range map[string]func(b *MovedBatch){
		"rolled out before the drain": func(b *MovedBatch) { b.Drained = t0.Add(time.Minute) },
		"no native Pod on the old":    func(b *MovedBatch) { b.OnOld, b.Stops = nil, nil },
	} {
		b := movedBatch()
		change(&b)
		if v := JudgeNodeReplaced(b); v.Outcome != promise.Error {
			t.Errorf("%s: %s %s, want an error", name, v.Outcome, v.Reason)
		}
		if _, err := judgeNodeReplaced(b); !errors.Is(err, errNotInFlight) {
			t.Errorf("%s: %v, want nothing judged", name, err)
		}
	}
}

// The moving Deployment is the legacy shape the migration expects: its
// helpers regular containers before the app, in the order they become
// native sidecars, each Pod with its own events directory; its budget
// lets one of its two replicas go.
func TestMovingDeployment(t *testing.T) {
	d, pdb := movingDeployment("fixture", "ns")
	spec := d.Spec.Template.Spec
	if len(spec.InitContainers) != 0 || len(spec.Containers) != 3 || spec.Containers[0].Name != "log-agent" || spec.Containers[1].Name != "proxy" || spec.Containers[0].RestartPolicy != nil {
		t.Fatalf("legacy template: %+v", spec.Containers)
	}
	native, err := sidecar.NativeSpec(spec, movingHelpers)
	if err != nil || sidecar.Admitted(native, movingHelpers) != nil {
		t.Errorf("migrated: %v, %v", err, sidecar.Admitted(native, movingHelpers))
	}
	if spec.Containers[1].ReadinessProbe.InitialDelaySeconds != 8 || spec.Containers[2].VolumeMounts[0].SubPathExpr != "$(POD_NAME)" || spec.NodeSelector[poolLabel] != "ns" {
		t.Errorf("probe %+v, mounts %+v, node selector %v", spec.Containers[1].ReadinessProbe, spec.Containers[2].VolumeMounts, spec.NodeSelector)
	}
	if *d.Spec.Replicas != 2 || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app"] != movingName {
		t.Errorf("replicas %d, budget %+v", *d.Spec.Replicas, pdb.Spec)
	}
}
