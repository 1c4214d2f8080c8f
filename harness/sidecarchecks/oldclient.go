package sidecarchecks

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// touchedBy is the Pod template annotation the old client sets: it marks
// the Pods of the template it wrote.
const touchedBy = "skewer.io/touched-by"

// CheckOldClient judges sidecar.stripped.old-client: a Deployment
// migrated (its batch checked before and after), then read and written
// back by a program built against k8s.io/api v0.27 (fixtures/oldclient,
// run in the cluster under a service account allowed just that), which
// knows no container restartPolicy and so drops it. It passes when the
// migration's checks (sidecar.Verify) name the dropped field in the
// stored template and in the Pod admitted from it, and a rollback brings
// the Deployment back to its legacy template, rolled out. It fails when
// they miss it - and when the field survived, since then the fixture did
// not play an old client.
func (s *Sidecars) CheckOldClient(ctx context.Context) promise.Verdict {
	const id = "sidecar.stripped.old-client"
	ev, err := s.oldClient(ctx)
	return verdict(id, ev, err)
}

func (s *Sidecars) oldClient(ctx context.Context) ([]string, error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	tg, was, err := s.legacyDeployment(ctx, ns, false)
	if err != nil {
		return nil, err
	}
	helpers := []string{CrashingSidecar}
	m := &sidecar.Migration{Client: s.cs, Helpers: helpers, Batches: [][]sidecar.Target{{tg}},
		Stop: sidecar.StopConditions{ReadyWithin: 2 * time.Minute}}
	res, err := m.Run(ctx)
	if err != nil {
		return nil, err
	}
	if len(res) != 1 || res[0].Breach != "" {
		return nil, fmt.Errorf("the migration of %s before the old client came: %+v", tg, res)
	}
	ev := []string{fmt.Sprintf("%s migrated, its batch checked before and after (%s)", tg, res[0].Took.Round(100*time.Millisecond))}

	out, err := s.runOldClient(ctx, tg)
	ev = append(ev, "the old client: "+out)
	if err != nil {
		return ev, err
	}
	d, err := s.cs.AppsV1().Deployments(ns).Get(ctx, tg.Name, metav1.GetOptions{})
	if err != nil {
		return ev, err
	}
	if err := droppedByOldClient(d.Spec.Template.Spec, helpers); err != nil {
		return ev, err
	}

	caughtEv, err := s.stuckAndCaught(ctx, tg, helpers)
	ev = append(ev, caughtEv...)
	if err != nil {
		return ev, err
	}
	rolled, err := s.rollBack(ctx, []sidecar.Target{tg}, map[sidecar.Target]legacy{tg: was})
	return append(ev, rolled...), err
}

// stuckAndCaught waits for what the cluster ends up with after the old
// client's write: a Pod of its template, the helper a plain init
// container that never ends, the app never started - which the
// migration's checks must name.
func (s *Sidecars) stuckAndCaught(ctx context.Context, tg sidecar.Target, helpers []string) ([]string, error) {
	var caught error
	var stuck string
	err := wait.For(ctx, "certify/sidecar-pod", "a Pod of the old client's template, stuck in Init, named by the migration's checks", func(ctx context.Context) (bool, string, error) {
		pods, err := s.cs.CoreV1().Pods(tg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + tg.Name})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods.Items {
			if p.Annotations[touchedBy] == "" || len(p.Status.InitContainerStatuses) == 0 || p.Status.InitContainerStatuses[0].State.Running == nil {
				continue
			}
			stuck = fmt.Sprintf("Pod %s: phase %s, %s", p.Name, p.Status.Phase, containerStates(&p))
			caught = sidecar.Verify(ctx, s.cs, tg, helpers)
			return caught != nil && strings.Contains(caught.Error(), p.Name) && strings.Contains(caught.Error(), "restartPolicy"), stuck, nil
		}
		return false, "no Pod of the old client's template has its helper running yet", nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (the migration's checks said: %v)", err, caught)
	}
	return []string{"what the cluster runs: " + stuck, "the migration's checks: " + strings.ReplaceAll(caught.Error(), "\n", "; ")}, nil
}

// droppedByOldClient judges sidecar.stripped.old-client on the template
// the old client's read-modify-write stored: it must have dropped the
// helpers' restartPolicy, or the fixture did not play an old client.
func droppedByOldClient(stored corev1.PodSpec, helpers []string) error {
	if err := sidecar.Admitted(stored, helpers); err == nil {
		return fmt.Errorf("the old client's write kept %s a native sidecar: it did not play an old client", CrashingSidecar)
	}
	return nil
}

// runOldClient runs fixtures/oldclient against tg's Deployment under a
// service account that may only read and update Deployments in its
// namespace, and returns what it printed.
func (s *Sidecars) runOldClient(ctx context.Context, tg sidecar.Target) (string, error) {
	const name = "old-client"
	ns := tg.Namespace
	if _, err := s.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "update"}}}}
	if _, err := s.cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	if _, err := s.cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		ServiceAccountName: name,
		RestartPolicy:      corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: name, Image: s.image, ImagePullPolicy: corev1.PullNever,
			Command: []string{"/oldclient"}, Args: []string{"-namespace", ns, "-deployment", tg.Name, "-annotate", touchedBy},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}},
	}}
	if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	ended, err := s.waitPod(ctx, "certify/sidecar-pod", ns, name, "ended", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if err != nil {
		return "", err
	}
	// What it said, from its termination message (its last words on
	// failure: FallbackToLogsOnError).
	out := "(said nothing)"
	if sts := ended.Status.ContainerStatuses; len(sts) == 1 && sts[0].State.Terminated != nil && sts[0].State.Terminated.Message != "" {
		out = strings.TrimSpace(sts[0].State.Terminated.Message)
	}
	if ended.Status.Phase != corev1.PodSucceeded {
		return out, fmt.Errorf("the old client failed: %s", containerStates(ended))
	}
	return out, nil
}
