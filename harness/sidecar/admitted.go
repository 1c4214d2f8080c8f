package sidecar

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Admitted says whether spec has the shape a migration gives it: the
// helpers first among the init containers, in their order, each a native
// sidecar (restartPolicy Always), and none left among the regular
// containers. The error names the container and the field that differ.
func Admitted(spec corev1.PodSpec, helpers []string) error {
	at := map[string]int{}
	for i, c := range spec.InitContainers {
		at[c.Name] = i
	}
	var errs []error
	for want, h := range helpers {
		i, ok := at[h]
		switch {
		case !ok && regular(spec, h):
			errs = append(errs, fmt.Errorf("containers[%s] is a regular container, want a native sidecar among the init containers", h))
		case !ok:
			errs = append(errs, fmt.Errorf("%s is gone from the Pod", h))
		case !native(spec.InitContainers[i]):
			errs = append(errs, fmt.Errorf("initContainers[%d] (%s).restartPolicy is %s, want Always: a plain init container that never ends keeps the Pod in Init",
				i, h, policy(spec.InitContainers[i])))
		case i != want:
			errs = append(errs, fmt.Errorf("initContainers[%d] is %s, want it at %d: the sidecars' start order changed", i, h, want))
		}
	}
	return errors.Join(errs...)
}

func regular(spec corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func policy(c corev1.Container) string {
	if c.RestartPolicy == nil {
		return "unset"
	}
	return string(*c.RestartPolicy)
}

// Verify checks a migrated Deployment as the migration checks each batch:
// its template, and every Pod of it the API server admitted (those not
// being deleted), have the helpers as native sidecars (Admitted). Run it
// again later to catch what changed a migrated Deployment since: an old
// client's read-modify-write, a webhook installed after the migration.
func Verify(ctx context.Context, cs kubernetes.Interface, t Target, helpers []string) error {
	d, err := cs.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", t, err)
	}
	var errs []error
	if err := Admitted(d.Spec.Template.Spec, helpers); err != nil {
		errs = append(errs, fmt.Errorf("%s's template: %w", t, err))
	}
	pods, err := cs.CoreV1().Pods(t.Namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		return fmt.Errorf("failed to list the Pods of %s: %w", t, err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := Admitted(p.Spec, helpers); err != nil {
			errs = append(errs, fmt.Errorf("Pod %s/%s as admitted: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// preflight is the check before a batch: the Deployment with its new
// template updated by a server-side dry run (the Deployment's admission
// chain), and a Pod of that template created by one (the Pods' chain,
// where a webhook that strips restartPolicy usually sits). The error
// names what the API server would store differently.
func preflight(ctx context.Context, cs kubernetes.Interface, t Target, d *appsv1.Deployment, helpers []string) error {
	dry, err := cs.AppsV1().Deployments(t.Namespace).Update(ctx, d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("the dry-run update of %s was refused: %w", t, err)
	}
	if err := Admitted(dry.Spec.Template.Spec, helpers); err != nil {
		return fmt.Errorf("%s's template as the API server would store it: %w", t, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: t.Name + "-preflight-", Namespace: t.Namespace,
		Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations}, Spec: d.Spec.Template.Spec}
	final, err := dryRunCreate(ctx, cs, pod)
	if err != nil {
		return fmt.Errorf("a Pod of %s's new template was refused by a dry run: %w", t, err)
	}
	if err := Admitted(final.Spec, helpers); err != nil {
		return fmt.Errorf("a Pod of %s's new template as the API server would admit it: %w", t, err)
	}
	return nil
}
