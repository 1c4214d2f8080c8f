package sidecarchecks

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
)

// What a node's /proc shows of a hardened helper (read from a kind node,
// the migrated proxy's process), and the lines that change when it is not.
const (
	hardenedStatus = "Name:\tfixture\nUid:\t65532\t65532\t65532\t65532\nGid:\t65532\t65532\t65532\t65532\n" +
		"CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n"
	hardenedMounts = "1040 1001 0:210 / / ro,relatime master:400 - overlay overlay rw,lowerdir=/a\n" +
		"1041 1040 0:212 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
	appMounts = hardenedMounts + "1050 1040 0:199 / /var/run/secrets/tokens ro,relatime - tmpfs tmpfs rw,size=16384k\n"
)

// migratedPod is the hardened Pod as the migration leaves it: the proxy a
// native sidecar, the app's token projected.
func migratedPod(t *testing.T) *corev1.Pod {
	d := hardenedDeployment(podBuilder{image: "fixture", ns: "ns", name: "hardened", node: "w1"})
	spec := d.Spec.Template.Spec
	c := spec.Containers[1]
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	spec.InitContainers, spec.Containers = []corev1.Container{c}, spec.Containers[:1]
	if err := sidecar.Admitted(spec, []string{HelperProxy}); err != nil {
		t.Fatal(err)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hardened-1"}, Spec: spec}
}

// The hardened helper passes; each privilege it should not have fails
// it, and so does a check that could not see the app's token.
func TestLeastPrivilege(t *testing.T) {
	pod := migratedPod(t)
	helper := Privileges{Container: HelperProxy, PID: 4242}.read(hardenedStatus, hardenedMounts)
	app := Privileges{Container: "app", PID: 4250}.read(hardenedStatus, appMounts)
	judge := func(pod *corev1.Pod, helper, app Privileges) promise.Verdict {
		return JudgeLeastPrivilege(testKubelets, onBoth(pod), onBoth(helper), onBoth(app))
	}
	if v := judge(pod, helper, app); v.Outcome != promise.Pass {
		t.Fatalf("the hardened helper: %s %s", v.Outcome, v.Reason)
	} else if !strings.Contains(strings.Join(v.Evidence, "\n"), "uid 65532/65532/65532/65532, CapEff 0000000000000000") {
		t.Errorf("the evidence does not say what the process ran with: %v", v.Evidence)
	}
	root := Privileges{Container: HelperProxy}.read(strings.Replace(hardenedStatus, "Uid:\t65532\t65532\t65532", "Uid:\t65532\t0\t65532", 1), hardenedMounts)
	netAdmin := Privileges{Container: HelperProxy}.read(strings.Replace(hardenedStatus, "CapEff:\t0000000000000000", "CapEff:\t0000000000001000", 1), hardenedMounts)
	escalates := Privileges{Container: HelperProxy}.read(strings.Replace(hardenedStatus, "NoNewPrivs:\t1", "NoNewPrivs:\t0", 1), hardenedMounts)
	unconfined := Privileges{Container: HelperProxy}.read(strings.Replace(hardenedStatus, "Seccomp:\t2", "Seccomp:\t0", 1), hardenedMounts)
	writable := Privileges{Container: HelperProxy}.read(hardenedStatus, strings.Replace(hardenedMounts, "/ / ro,", "/ / rw,", 1))
	token := Privileges{Container: HelperProxy}.read(hardenedStatus, appMounts)
	defaultAccount := migratedPod(t)
	defaultAccount.Spec.ServiceAccountName = "default"
	automount := migratedPod(t)
	automount.Spec.AutomountServiceAccountToken = nil
	capAdded := migratedPod(t)
	capAdded.Spec.InitContainers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
	stillRegular := migratedPod(t)
	stillRegular.Spec.Containers = append(stillRegular.Spec.Containers, stillRegular.Spec.InitContainers[0])
	stillRegular.Spec.InitContainers = nil
	for name, c := range map[string]struct {
		pod    *corev1.Pod
		helper Privileges
		want   promise.Outcome
		names  string
	}{
		"root":               {pod, root, promise.Fail, "uid [65532 0 65532 65532]"},
		"a capability":       {pod, netAdmin, promise.Fail, "effective capabilities"},
		"escalation":         {pod, escalates, promise.Fail, "NoNewPrivs"},
		"no seccomp":         {pod, unconfined, promise.Fail, "Seccomp mode"},
		"writable root":      {pod, writable, promise.Fail, "read-write"},
		"a token":            {pod, token, promise.Fail, "token mounted at [/var/run/secrets/tokens]"},
		"default account":    {defaultAccount, helper, promise.Fail, `service account "default"`},
		"automount":          {automount, helper, promise.Fail, "automountServiceAccountToken"},
		"capability in spec": {capAdded, helper, promise.Fail, "want none added"},
		"not migrated":       {stillRegular, helper, promise.Fail, "regular container"},
		"no token to see":    {pod, helper, promise.Error, "the app's projected token"},
	} {
		a := app
		if name == "no token to see" {
			a = Privileges{Container: "app"}.read(hardenedStatus, hardenedMounts)
		}
		v := judge(c.pod, c.helper, a)
		if v.Outcome != c.want || !strings.Contains(v.Reason, c.names) {
			t.Errorf("%s: %s %q, want %s naming %q", name, v.Outcome, v.Reason, c.want, c.names)
		}
	}
}

// The Pods after a rollback are judged against the legacy Pod as it was
// admitted: the token volume's per-Pod name is the same volume, a helper
// left a restartable init container or a lost port is not.
func TestRolledBackPods(t *testing.T) {
	tg := sidecar.Target{Namespace: "ns", Name: "web"}
	legacy := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}, Spec: corev1.PodSpec{ServiceAccountName: "web",
		Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x1y2z", MountPath: defaultTokenPath}}},
			{Name: "proxy", Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}},
		Volumes: []corev1.Volume{{Name: "shared"}, {Name: "kube-api-access-x1y2z"}}}}
	back := *legacy.DeepCopy()
	back.Name = "web-b"
	back.Spec.Volumes[1].Name, back.Spec.Containers[0].VolumeMounts[0].Name = "kube-api-access-q7w8e", "kube-api-access-q7w8e"
	if err := rolledBackPods(tg, legacy, []corev1.Pod{back}); err != nil {
		t.Fatalf("the same Pod again: %v", err)
	}
	native := *back.DeepCopy()
	always := corev1.ContainerRestartPolicyAlways
	native.Spec.InitContainers = []corev1.Container{native.Spec.Containers[1]}
	native.Spec.InitContainers[0].RestartPolicy = &always
	native.Spec.Containers = native.Spec.Containers[:1]
	portless := *back.DeepCopy()
	portless.Spec.Containers[1].Ports = nil
	for name, pods := range map[string][]corev1.Pod{
		"a native sidecar left": {back, native},
		"a port lost":           {portless},
		"no Pod":                nil,
	} {
		if err := rolledBackPods(tg, legacy, pods); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}
