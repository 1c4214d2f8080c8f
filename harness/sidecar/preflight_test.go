package sidecar

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCompare(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	want := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{
		{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}, {Name: "agent", RestartPolicy: &always}}}}
	same := want.DeepCopy()
	if lost := Compare(want, same); len(lost) != 0 {
		t.Errorf("Compare of identical Pods = %v", lost)
	}
	stripped := want.DeepCopy()
	stripped.Spec.InitContainers[1].RestartPolicy = nil
	stripped.Spec.InitContainers = stripped.Spec.InitContainers[:2] // agent dropped entirely
	lost := Compare(want, stripped)
	if len(lost) != 2 || lost[0].String() != "initContainers[proxy].restartPolicy" || lost[1].Field != "(the container)" {
		t.Errorf("Compare = %v", lost)
	}
}
