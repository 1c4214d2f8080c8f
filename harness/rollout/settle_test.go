package rollout

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSettled(t *testing.T) {
	static := func(name, uid string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Annotations: map[string]string{configSource: "file"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: strings.SplitN(name, "-cp", 2)[0]}}}}
	}
	mirror := func(name, uid string, ready corev1.ConditionStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "api-" + types.UID(uid), Annotations: map[string]string{corev1.MirrorPodAnnotationKey: uid}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
	}
	kubelet := []corev1.Pod{static("etcd-cp3", "new-etcd"), static("kube-apiserver-cp3", "new-api"),
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy-x", UID: "kp", Annotations: map[string]string{configSource: "api"}}}}
	mirrors := []corev1.Pod{mirror("etcd-cp3", "new-etcd", corev1.ConditionTrue), mirror("kube-apiserver-cp3", "new-api", corev1.ConditionTrue)}
	running := []runningContainer{{"etcd-cp3", "new-etcd", "etcd"}, {"kube-apiserver-cp3", "new-api", "kube-apiserver"}, {"kube-proxy-x", "kp", "kube-proxy"}}
	if ok, seen := settled(2, kubelet, mirrors, running); !ok {
		t.Fatalf("every static Pod run as the kubelet computes it: not settled: %s", seen)
	}
	for _, tc := range []struct {
		name      string
		manifests int
		kubelet   []corev1.Pod
		mirrors   []corev1.Pod
		running   []runningContainer
		want      string
	}{
		{"the kubelet has not read every manifest yet", 3, kubelet, mirrors, running, "2 static Pods of 3 manifests"},
		// The failure this wait is for: the new kubelet hashed etcd's
		// manifest to another UID, and the old container still runs.
		{"an orphan of the old UID still runs", 2, kubelet, mirrors,
			append([]runningContainer{{"etcd-cp3", "old-etcd", "etcd"}}, running...), "still runs as Pod old-etcd, not new-etcd"},
		{"the new Pod's container not started yet", 2, kubelet, mirrors, running[1:], "etcd-cp3: 0 of 1 containers running"},
		{"the mirror Pod still the old one's", 2, kubelet,
			[]corev1.Pod{mirror("etcd-cp3", "old-etcd", corev1.ConditionTrue), mirrors[1]}, running, "mirror Pod is of old-etcd, not new-etcd"},
		{"no mirror Pod", 2, kubelet, mirrors[1:], running, "etcd-cp3 has no mirror Pod"},
		{"not Ready", 2, kubelet, []corev1.Pod{mirrors[0], mirror("kube-apiserver-cp3", "new-api", corev1.ConditionFalse)}, running,
			"kube-apiserver-cp3 is not Ready"},
	} {
		ok, seen := settled(tc.manifests, tc.kubelet, tc.mirrors, tc.running)
		if ok || !strings.Contains(seen, tc.want) {
			t.Errorf("%s: settled %v (%q), want not settled: %q", tc.name, ok, seen, tc.want)
		}
	}
}
