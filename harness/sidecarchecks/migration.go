package sidecarchecks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
)

// CheckMigration moves a helper to a native sidecar in three batches (a
// namespace each, picked by namespace) and judges sidecar.migration.batches (the second
// batch's helper crashes once in every new Pod: the breach stops the
// expansion there, the third batch untouched) and
// sidecar.migration.rollback (every migrated Deployment back on its
// legacy template - hash, ports, volumes, service account - and rolled
// out on it).
func (s *Sidecars) CheckMigration(ctx context.Context) []promise.Verdict {
	const batches, rollback = "sidecar.migration.batches", "sidecar.migration.rollback"
	var targets []sidecar.Target
	before := map[sidecar.Target]legacy{}
	for i := range 3 {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return []promise.Verdict{failed(batches, "%v", err), failed(rollback, "%v", err)}
		}
		defer done()
		tg, was, err := s.legacyDeployment(ctx, ns, i == 1)
		if err != nil {
			return []promise.Verdict{failed(batches, "%v", err), failed(rollback, "%v", err)}
		}
		targets = append(targets, tg)
		before[tg] = was
	}
	ev, err := s.migrateInBatches(ctx, targets, before)
	out := []promise.Verdict{verdict(batches, ev, err)}
	ev, err = s.rollBack(ctx, targets, before)
	return append(out, verdict(rollback, ev, err))
}

// legacy is what a Deployment ran before its migration: its template,
// and its Pod as the API server admitted it.
type legacy struct {
	Template corev1.PodTemplateSpec
	Pod      corev1.Pod
}

// legacyDeployment runs the app with the proxy as a regular container in
// ns, with a service account of its own and the proxy's port named, and
// waits until it is available.
func (s *Sidecars) legacyDeployment(ctx context.Context, ns string, crashes bool) (sidecar.Target, legacy, error) {
	b := podBuilder{image: s.image, ns: ns, name: "web"}
	args := []string{"-load-after", "0s"}
	if crashes {
		args = append(args, "-crash-after", "3s", "-crash-marker", "/shared/crashed")
	}
	proxy := b.container(CrashingSidecar, "proxy", args...)
	proxy.Ports = []corev1.ContainerPort{{Name: "admin", ContainerPort: 8080}}
	pod := b.pod(nil, []corev1.Container{b.container("app", "app"), proxy})
	pod.Spec.ServiceAccountName = "web"
	one := int32(1)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
	tg := sidecar.Target{Namespace: ns, Name: d.Name}
	if _, err := s.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		return tg, legacy{}, err
	}
	created, err := s.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return tg, legacy{}, err
	}
	if err := s.waitDeployment(ctx, ns, d.Name, "available", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 }); err != nil {
		return tg, legacy{}, err
	}
	pods, err := sidecar.PodsOf(ctx, s.cs, []sidecar.Target{tg})
	if err != nil || len(pods) != 1 {
		return tg, legacy{}, fmt.Errorf("the legacy Pod of %s: %d running, %v", tg, len(pods), err)
	}
	return tg, legacy{created.Spec.Template, pods[0]}, nil
}

func (s *Sidecars) migrateInBatches(ctx context.Context, targets []sidecar.Target, before map[sidecar.Target]legacy) ([]string, error) {
	m := &sidecar.Migration{Client: s.cs, Helpers: []string{CrashingSidecar},
		Selections: []sidecar.Selection{{Namespace: targets[0].Namespace}, {Namespace: targets[1].Namespace}, {Namespace: targets[2].Namespace}},
		Stop:       sidecar.StopConditions{ReadyWithin: 2 * time.Minute, MaxRestarts: 0},
		Settle:     10 * time.Second}
	results, err := m.Run(ctx)
	if err != nil {
		return nil, err
	}
	ev, err := stoppedAtBreach(results)
	if err != nil {
		return ev, err
	}
	third, err := s.cs.AppsV1().Deployments(targets[2].Namespace).Get(ctx, targets[2].Name, metav1.GetOptions{})
	if err != nil {
		return ev, err
	}
	if _, touched := third.Annotations[sidecar.LegacyAnnotation]; touched || sidecar.TemplateHash(third.Spec.Template) != sidecar.TemplateHash(before[targets[2]].Template) {
		return ev, fmt.Errorf("the batch after the breach was changed: %s", targets[2])
	}
	return append(ev, fmt.Sprintf("the batch after the breach (%s) untouched", targets[2])), nil
}

// stoppedAtBreach judges sidecar.migration.batches on a migration's
// batches (results): the first clean, the second - whose helper crashes -
// breached, and none after it.
func stoppedAtBreach(results []sidecar.BatchResult) ([]string, error) {
	var ev []string
	for i, r := range results {
		ev = append(ev, fmt.Sprintf("batch %d %v: rolled out in %s, %d restarts; breach: %q", i+1, r.Targets, r.Took.Round(100*time.Millisecond), r.Restarts, r.Breach))
	}
	switch {
	case len(results) != 2:
		return ev, fmt.Errorf("the expansion ran %d batches, want it stopped at the second, the breaching one", len(results))
	case results[0].Breach != "":
		return ev, fmt.Errorf("the first batch breached: %s", results[0].Breach)
	case results[1].Breach == "":
		return ev, fmt.Errorf("the second batch's helper crashed, and no breach was seen")
	case !strings.Contains(results[1].Breach, "MaxRestarts"):
		// A breach of something else (a preflight refusal, a slow rollout)
		// stopped it, not the crash the batch is made to show.
		return ev, fmt.Errorf("the second batch's helper crashed, but the batch stopped on another breach: %s", results[1].Breach)
	}
	return ev, nil
}

func (s *Sidecars) rollBack(ctx context.Context, targets []sidecar.Target, before map[sidecar.Target]legacy) ([]string, error) {
	if err := sidecar.Rollback(ctx, s.cs, targets); err != nil {
		return nil, err
	}
	for _, tg := range targets {
		d, err := s.cs.AppsV1().Deployments(tg.Namespace).Get(ctx, tg.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if err := backOnLegacy(tg, before[tg].Template, d.Spec.Template); err != nil {
			return nil, err
		}
		// Rolled out as the controller has observed the rollback: a status
		// read before it is the migrated template's, rolled out too.
		if err := s.waitDeployment(ctx, tg.Namespace, tg.Name, "rolled back", func(d *appsv1.Deployment) bool {
			done, _ := sidecar.RolledOut(d)
			return done
		}); err != nil {
			return nil, err
		}
		pods, err := sidecar.PodsOf(ctx, s.cs, []sidecar.Target{tg})
		if err != nil {
			return nil, err
		}
		if err := rolledBackPods(tg, before[tg].Pod, pods); err != nil {
			return nil, err
		}
	}
	return []string{fmt.Sprintf("%d Deployments on their legacy template again (hash, ports, volumes, service account as before) and rolled out on it; "+
		"each one's running Pod as its legacy Pod was admitted (no restartable init container, the same containers, ports, mounts, volumes and service account)", len(targets))}, nil
}

// rolledBackPods judges the Pods tg runs after its rollback (pods) against
// its legacy Pod as the API server admitted it before the migration: the
// same shape (podShape), so what admission added then - a webhook's
// output, the token volume - it adds again, and no helper is left a
// restartable init container. No Pod at all is no evidence.
func rolledBackPods(tg sidecar.Target, legacy corev1.Pod, pods []corev1.Pod) error {
	if len(pods) == 0 {
		return fmt.Errorf("%s runs no Pod after its rollback", tg)
	}
	want := podShape(legacy.Spec)
	var errs []error
	for _, p := range pods {
		got := podShape(p.Spec)
		if missing, extra := diffLines(want, got); len(missing)+len(extra) > 0 {
			errs = append(errs, fmt.Errorf("Pod %s/%s after the rollback differs from the legacy Pod %s: lacks %v, has %v", p.Namespace, p.Name, legacy.Name, missing, extra))
		}
	}
	return errors.Join(errs...)
}

// podShape is what a rollback must give the Pods it runs back, one line
// each: the service account, every container in its place (an init
// container with its restart policy) with its ports and mounts, and the
// volumes; a generated name's per-Pod suffix (the token volume's) cut.
func podShape(spec corev1.PodSpec) []string {
	out := []string{"serviceAccount " + spec.ServiceAccountName}
	line := func(kind string, c corev1.Container) string {
		var ports, mounts []string
		for _, p := range c.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d/%s", p.Name, p.ContainerPort, p.Protocol))
		}
		for _, m := range c.VolumeMounts {
			mounts = append(mounts, generic(m.Name)+"@"+m.MountPath)
		}
		policy := ""
		if c.RestartPolicy != nil {
			policy = " restartPolicy " + string(*c.RestartPolicy)
		}
		return fmt.Sprintf("%s %s%s ports %v mounts %v", kind, c.Name, policy, ports, mounts)
	}
	for i, c := range spec.InitContainers {
		out = append(out, line(fmt.Sprintf("initContainers[%d]", i), c))
	}
	for i, c := range spec.Containers {
		out = append(out, line(fmt.Sprintf("containers[%d]", i), c))
	}
	for _, v := range spec.Volumes {
		out = append(out, "volume "+generic(v.Name))
	}
	return out
}

// generic cuts the per-Pod suffix off the name of the token volume the
// service account admission adds (kube-api-access-xxxxx).
func generic(volume string) string {
	if strings.HasPrefix(volume, "kube-api-access-") {
		return "kube-api-access-*"
	}
	return volume
}

// diffLines are the lines of want not in got, and of got not in want.
func diffLines(want, got []string) (missing, extra []string) {
	for _, l := range want {
		if !slices.Contains(got, l) {
			missing = append(missing, l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			extra = append(extra, l)
		}
	}
	return missing, extra
}

// backOnLegacy judges sidecar.migration.rollback on tg's template after
// the rollback (got): the legacy template it had before (hash, ports,
// volumes, service account).
func backOnLegacy(tg sidecar.Target, before, got corev1.PodTemplateSpec) error {
	if err := sidecar.SameTemplate(before, got); err != nil {
		return fmt.Errorf("%s: %w", tg, err)
	}
	return nil
}
