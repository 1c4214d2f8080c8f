package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LegacyAnnotation keeps, on a migrated Deployment, the Pod template it
// had before: what a rollback restores.
const LegacyAnnotation = "skewer.io/legacy-template"

// Target is one Deployment to migrate.
type Target struct{ Namespace, Name string }

func (t Target) String() string { return t.Namespace + "/" + t.Name }

// StopConditions end a migration when a batch breaches any of them.
type StopConditions struct {
	// ReadyWithin bounds the time a batch's Deployments take to finish
	// their rollout.
	ReadyWithin time.Duration
	// MaxRestarts bounds the container restarts of a batch's new Pods.
	MaxRestarts int32
}

// Migration moves helper containers of Deployments to native sidecars,
// batch by batch, stopping at the first batch that breaches a condition.
type Migration struct {
	Client kubernetes.Interface
	// Helpers names the containers to make native sidecars.
	Helpers []string
	Batches [][]Target
	Stop    StopConditions
	// Settle is how long a batch's new Pods are watched for restarts once
	// they are ready.
	Settle time.Duration
}

// BatchResult is what one batch did.
type BatchResult struct {
	Targets []Target
	// Took is the time until every Deployment of the batch was rolled out.
	Took     time.Duration
	Restarts int32
	// Breach says which stop condition the batch breached, if any.
	Breach string
}

// Run migrates batch after batch; a breach ends it with the batches done
// so far (the breaching one last), and no later batch is touched.
func (m *Migration) Run(ctx context.Context) ([]BatchResult, error) {
	var out []BatchResult
	for _, batch := range m.Batches {
		res := BatchResult{Targets: batch}
		start := time.Now()
		for _, t := range batch {
			if err := m.convert(ctx, t); err != nil {
				return out, err
			}
		}
		for _, t := range batch {
			err := waitRolledOut(ctx, m.Client, t, start.Add(m.Stop.ReadyWithin))
			if err != nil {
				res.Breach = fmt.Sprintf("%s not rolled out within %s: %v", t, m.Stop.ReadyWithin, err)
				break
			}
		}
		res.Took = time.Since(start)
		if res.Breach == "" {
			restarts, err := m.watchRestarts(ctx, batch)
			if err != nil {
				return out, err
			}
			res.Restarts = restarts
			if restarts > m.Stop.MaxRestarts {
				res.Breach = fmt.Sprintf("%d container restarts in %s, more than %d", restarts, m.Settle, m.Stop.MaxRestarts)
			}
		}
		out = append(out, res)
		if res.Breach != "" {
			return out, nil
		}
	}
	return out, nil
}

// convert records the Deployment's template and makes its helpers native
// sidecars.
func (m *Migration) convert(ctx context.Context, t Target) error {
	d, err := m.Client.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", t, err)
	}
	legacy, err := json.Marshal(d.Spec.Template)
	if err != nil {
		return err
	}
	native, err := ToNative(d.Spec.Template.Spec, m.Helpers)
	if err != nil {
		return fmt.Errorf("%s: %w", t, err)
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[LegacyAnnotation] = string(legacy)
	d.Spec.Template.Spec = native
	_, err = m.Client.AppsV1().Deployments(t.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	return err
}

// ToNative moves the named helper containers to the front of the init
// containers as native sidecars, everything else about them unchanged.
func ToNative(spec corev1.PodSpec, helpers []string) (corev1.PodSpec, error) {
	out := *spec.DeepCopy()
	always := corev1.ContainerRestartPolicyAlways
	var sidecars, rest []corev1.Container
	for _, c := range out.Containers {
		if slices.Contains(helpers, c.Name) {
			c.RestartPolicy = &always
			sidecars = append(sidecars, c)
		} else {
			rest = append(rest, c)
		}
	}
	if len(sidecars) != len(helpers) {
		return out, fmt.Errorf("helpers %v: only %d found among the containers", helpers, len(sidecars))
	}
	if len(rest) == 0 {
		return out, fmt.Errorf("no container left besides the helpers")
	}
	out.Containers = rest
	out.InitContainers = append(sidecars, out.InitContainers...)
	return out, nil
}

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

// waitRolledOut waits until t's Deployment has rolled out its current
// template, or deadline passes.
func waitRolledOut(ctx context.Context, cs kubernetes.Interface, t Target, deadline time.Time) error {
	last := "not observed"
	for time.Now().Before(deadline) {
		d, err := cs.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		if st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want {
			return nil
		}
		last = fmt.Sprintf("%d updated, %d available, %d total of %d", st.UpdatedReplicas, st.AvailableReplicas, st.Replicas, want)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("last seen: %s", last)
}

// watchRestarts sums the restarts of the batch's Pods over Settle.
func (m *Migration) watchRestarts(ctx context.Context, batch []Target) (int32, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(m.Settle):
	}
	var sum int32
	for _, t := range batch {
		d, err := m.Client.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		sel := metav1.FormatLabelSelector(d.Spec.Selector)
		pods, err := m.Client.CoreV1().Pods(t.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return 0, err
		}
		for _, p := range pods.Items {
			for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				sum += st.RestartCount
			}
		}
	}
	return sum, nil
}
