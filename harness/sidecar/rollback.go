package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Rollback restores the legacy template of every migrated Deployment
// among targets and checks it: same template hash, ports, volumes and
// service account as before the migration.
func Rollback(ctx context.Context, cs kubernetes.Interface, targets []Target) error {
	for _, t := range targets {
		d, err := cs.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("failed to read %s: %w", t, err)
		}
		raw, ok := d.Annotations[LegacyAnnotation]
		if !ok {
			continue // never migrated
		}
		var legacy corev1.PodTemplateSpec
		if err := json.Unmarshal([]byte(raw), &legacy); err != nil {
			return fmt.Errorf("%s: the recorded legacy template: %w", t, err)
		}
		d.Spec.Template = legacy
		delete(d.Annotations, LegacyAnnotation)
		if _, err := cs.AppsV1().Deployments(t.Namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("failed to restore %s: %w", t, err)
		}
		got, err := cs.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := SameTemplate(legacy, got.Spec.Template); err != nil {
			return fmt.Errorf("%s after rollback: %w", t, err)
		}
	}
	return nil
}

// SameTemplate compares what a rollback must restore.
func SameTemplate(want, got corev1.PodTemplateSpec) error {
	switch {
	case TemplateHash(want) != TemplateHash(got):
		return fmt.Errorf("template hash %s, want %s", TemplateHash(got), TemplateHash(want))
	case got.Spec.ServiceAccountName != want.Spec.ServiceAccountName:
		return fmt.Errorf("service account %q, want %q", got.Spec.ServiceAccountName, want.Spec.ServiceAccountName)
	case !slices.EqualFunc(got.Spec.Volumes, want.Spec.Volumes, func(a, b corev1.Volume) bool { return a.Name == b.Name }):
		return fmt.Errorf("volumes differ")
	case fmt.Sprint(ports(got.Spec)) != fmt.Sprint(ports(want.Spec)):
		return fmt.Errorf("ports %v, want %v", ports(got.Spec), ports(want.Spec))
	}
	return nil
}

// TemplateHash digests a Pod template's spec.
func TemplateHash(t corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t.Spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func ports(spec corev1.PodSpec) []string {
	var out []string
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		for _, p := range c.Ports {
			out = append(out, fmt.Sprintf("%s/%s:%d", c.Name, p.Name, p.ContainerPort))
		}
	}
	slices.Sort(out)
	return out
}
