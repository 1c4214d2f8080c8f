package sidecar

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestToNativeAndBack(t *testing.T) {
	legacy := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		ServiceAccountName: "web",
		InitContainers:     []corev1.Container{{Name: "setup"}},
		Containers: []corev1.Container{
			{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "proxy", Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 15000}}},
		},
		Volumes: []corev1.Volume{{Name: "shared"}},
	}}
	native, err := ToNative(legacy.Spec, []string{"proxy"})
	if err != nil {
		t.Fatal(err)
	}
	if len(native.Containers) != 1 || native.InitContainers[0].Name != "proxy" || native.InitContainers[1].Name != "setup" {
		t.Fatalf("ToNative = %+v", native)
	}
	if rp := native.InitContainers[0].RestartPolicy; rp == nil || *rp != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the helper is not a native sidecar: %v", rp)
	}
	if native.InitContainers[0].Ports[0].ContainerPort != 15000 {
		t.Error("the helper lost its port")
	}
	migrated := corev1.PodTemplateSpec{Spec: native}
	err = SameTemplate(legacy, migrated)
	if err == nil || !strings.Contains(err.Error(), "template hash") {
		t.Errorf("SameTemplate(legacy, native) = %v, want a hash difference", err)
	}
	if err := SameTemplate(legacy, *legacy.DeepCopy()); err != nil {
		t.Errorf("SameTemplate of a copy = %v", err)
	}
	if _, err := ToNative(legacy.Spec, []string{"mesh"}); err == nil {
		t.Error("want an error for a helper that is not there")
	}
	if _, err := ToNative(legacy.Spec, []string{"app", "proxy"}); err == nil {
		t.Error("want an error when no container is left")
	}
}
