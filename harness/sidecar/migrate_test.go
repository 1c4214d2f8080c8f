package sidecar

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
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
	native, err := toNative(legacy.Spec, []string{"proxy"})
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
	if _, err := toNative(legacy.Spec, []string{"mesh"}); err == nil {
		t.Error("want an error for a helper that is not there")
	}
	if _, err := toNative(legacy.Spec, []string{"app", "proxy"}); err == nil {
		t.Error("want an error when no container is left")
	}
}

func TestStopConditionsValidate(t *testing.T) {
	for _, tc := range []struct {
		stop StopConditions
		want string // "" when valid
	}{
		{StopConditions{ReadyWithin: time.Minute}, ""},
		{StopConditions{ReadyWithin: time.Minute, MaxRestarts: 2}, ""},
		{StopConditions{}, "ReadyWithin 0s is not positive"},
		{StopConditions{ReadyWithin: -time.Second}, "ReadyWithin -1s is not positive"},
		{StopConditions{ReadyWithin: time.Minute, MaxRestarts: -1}, "MaxRestarts -1 is negative"},
	} {
		checkError(t, tc.stop.Validate(), tc.want, "%+v.Validate()", tc.stop)
	}
}

func TestMigrationValidate(t *testing.T) {
	valid := func() *Migration {
		return &Migration{Client: panicClient{}, Helpers: []string{"proxy"},
			Batches: [][]Target{{{"a", "web"}}, {{"b", "web"}, {"c", "web"}}},
			Stop:    StopConditions{ReadyWithin: time.Minute}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Migration)
		want   string // "" when valid
	}{
		{"valid", func(*Migration) {}, ""},
		{"no client", func(m *Migration) { m.Client = nil }, "no Client"},
		{"no helpers", func(m *Migration) { m.Helpers = nil }, "no Helpers"},
		{"no batches", func(m *Migration) { m.Batches = nil }, "no Batches"},
		{"an empty batch", func(m *Migration) { m.Batches = append(m.Batches, nil) }, "batch 3 is empty"},
		{"negative settle", func(m *Migration) { m.Settle = -time.Second }, "Settle -1s is negative"},
		{"zero stop conditions", func(m *Migration) { m.Stop = StopConditions{} }, "ReadyWithin 0s is not positive"},
	} {
		m := valid()
		tc.change(m)
		checkError(t, m.Validate(), tc.want, "%s: Validate()", tc.name)
	}
}

// Run refuses an invalid migration before it touches anything: the
// client panics at the first call.
func TestRunValidatesFirst(t *testing.T) {
	m := &Migration{Client: panicClient{}, Helpers: []string{"proxy"}, Batches: [][]Target{{{"a", "web"}}}}
	out, err := m.Run(context.Background())
	if err == nil || out != nil {
		t.Fatalf("Run = %v, %v, want no results and an error", out, err)
	}
}

// A batch's rollout that does not finish by its deadline is a breach that
// says what it last saw.
func TestWaitRolledOutSaysWhatItSaw(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1}}
	err := waitRolledOut(context.Background(), deploymentClient{d: d}, Target{"a", "web"}, time.Now().Add(50*time.Millisecond))
	want := "waiting for a/web rolled out: last seen: 1 updated, 1 available, 2 total of 1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("waitRolledOut = %v, want it to say %q", err, want)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
	if err := waitRolledOut(context.Background(), deploymentClient{d: d}, Target{"a", "web"}, time.Now().Add(-time.Second)); err != nil {
		t.Errorf("waitRolledOut of a rolled-out Deployment past the deadline = %v, want one look and nil", err)
	}
}

func checkError(t *testing.T, err error, want string, format string, args ...any) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf(format+" = %v, want nil", append(args, err)...)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf(format+" = %v, want an error saying %q", append(args, err, want)...)
	}
}

// panicClient is a Client any call to which panics.
type panicClient struct{ kubernetes.Interface }

// deploymentClient answers every Deployment Get with d.
type deploymentClient struct {
	kubernetes.Interface
	d *appsv1.Deployment
}

func (c deploymentClient) AppsV1() appsv1client.AppsV1Interface { return deploymentApps{d: c.d} }

type deploymentApps struct {
	appsv1client.AppsV1Interface
	d *appsv1.Deployment
}

func (a deploymentApps) Deployments(string) appsv1client.DeploymentInterface {
	return deployments{d: a.d}
}

type deployments struct {
	appsv1client.DeploymentInterface
	d *appsv1.Deployment
}

func (d deployments) Get(context.Context, string, metav1.GetOptions) (*appsv1.Deployment, error) {
	return d.d.DeepCopy(), nil
}

// Admitted names what differs from a migrated Pod's shape: the container
// and the field.
func TestAdmitted(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := func(name string) corev1.Container { return corev1.Container{Name: name, RestartPolicy: &always} }
	helpers := []string{"proxy", "logs"}
	for _, tc := range []struct {
		name       string
		init, main []corev1.Container
		want       string // "" when admitted as migrated
	}{
		{"migrated", []corev1.Container{sidecar("proxy"), sidecar("logs"), {Name: "setup"}}, []corev1.Container{{Name: "app"}}, ""},
		{"restartPolicy dropped", []corev1.Container{{Name: "proxy"}, sidecar("logs")}, []corev1.Container{{Name: "app"}},
			"initContainers[0] (proxy).restartPolicy is unset, want Always"},
		{"order changed", []corev1.Container{sidecar("logs"), sidecar("proxy")}, []corev1.Container{{Name: "app"}},
			"initContainers[1] is proxy, want it at 0"},
		{"still legacy", []corev1.Container{sidecar("logs")}, []corev1.Container{{Name: "app"}, {Name: "proxy"}},
			"containers[proxy] is a regular container"},
		{"gone", []corev1.Container{sidecar("proxy")}, []corev1.Container{{Name: "app"}}, "logs is gone from the Pod"},
	} {
		checkError(t, Admitted(corev1.PodSpec{InitContainers: tc.init, Containers: tc.main}, helpers), tc.want, "%s: Admitted", tc.name)
	}
}
