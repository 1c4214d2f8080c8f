package rollout

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A drain waits on the answers that leave a Pod going or to be asked
// again, and stops on any other. The terminating namespace's refusal is
// built as the NamespaceLifecycle admission plugin builds it (k8s.io/
// apiserver plugin/namespace/lifecycle): a 403 with the cause
// NamespaceTerminating - a certification once failed on it when a check's
// namespace was being deleted as the next check drained the worker.
func TestEvictionWaits(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	terminating := apierrors.NewForbidden(pods, "web-1", fmt.Errorf("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"})
	for _, tc := range []struct {
		name  string
		err   error
		waits bool
	}{
		{"evicted", nil, true},
		{"gone", apierrors.NewNotFound(pods, "web-1"), true},
		{"a disruption budget", apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0), true},
		{"its namespace terminating", terminating, true},
		{"forbidden otherwise", apierrors.NewForbidden(pods, "web-1", errors.New("RBAC")), false},
		{"the server failed", apierrors.NewInternalError(errors.New("etcd")), false},
	} {
		if got := evictionWaits(tc.err); got != tc.waits {
			t.Errorf("%s: waits %v, want %v (%v)", tc.name, got, tc.waits, tc.err)
		}
	}
}
