package restarts

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A static Pod's logs are under the kubelet's UID for it (its mirror
// Pod's config.mirror annotation), any other Pod's under its own.
func TestLogUID(t *testing.T) {
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "74f7ded5-fc91-4907-85f6-b00899e533e5",
		Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "dfcb06ee178a53481de09283841eb97e", "kubernetes.io/config.source": "file"}}}
	if got, want := logUID(mirror), types.UID("dfcb06ee178a53481de09283841eb97e"); got != want {
		t.Errorf("a mirror Pod's logs: %s, want %s", got, want)
	}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "1c2f0e3a-0000-4000-8000-000000000001"}}
	if got := logUID(plain); got != plain.UID {
		t.Errorf("a Pod's logs: %s, want %s", got, plain.UID)
	}
}
