// Package sidecar holds what a migration to native sidecars needs beyond
// the suite: a preflight that shows what the API server will really store.
package sidecar

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Lost is a native sidecar the final object no longer has as one.
type Lost struct {
	Container string
	// Field is what was removed, e.g. "restartPolicy".
	Field string
}

func (l Lost) String() string { return fmt.Sprintf("initContainers[%s].%s", l.Container, l.Field) }

// Preflight creates pod with a server-side dry run - every mutating
// webhook and default applies, nothing is stored - and reports each init
// container that asked to be a native sidecar (restartPolicy: Always) and
// is not one in the object the API server would store. An error from the
// dry run (a Pod the API rejects) is returned as is.
func Preflight(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) ([]Lost, error) {
	final, err := dryRunCreate(ctx, cs, pod)
	if err != nil {
		return nil, err
	}
	return Compare(pod, final), nil
}

// dryRunCreate is pod as the API server would store it: created by a
// server-side dry run, through every mutating webhook and default.
func dryRunCreate(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) (*corev1.Pod, error) {
	return cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// Compare lists the native sidecars of want that got are missing.
func Compare(want, got *corev1.Pod) []Lost {
	stored := map[string]corev1.Container{}
	for _, c := range got.Spec.InitContainers {
		stored[c.Name] = c
	}
	var lost []Lost
	for _, c := range want.Spec.InitContainers {
		if !native(c) {
			continue
		}
		s, ok := stored[c.Name]
		switch {
		case !ok:
			lost = append(lost, Lost{Container: c.Name, Field: "(the container)"})
		case !native(s):
			lost = append(lost, Lost{Container: c.Name, Field: "restartPolicy"})
		}
	}
	return lost
}

func native(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
