package sidecarchecks

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
)

// probeHungAfter is when the hung-helper case's helper stops answering,
// after its start: its readiness probe (every second) has found it ready
// by then, which ends the batch's rollout, and the batch settles 6 s
// after that - a probe failure a second from the hang on (one was seen
// in a settle of 3 s, session 37: too close to none).
const probeHungAfter = 3 * time.Second

// stopCase is a Deployment made to breach one stop condition when its
// helper is migrated, and the breach the migration must name.
type stopCase struct {
	name     string
	helper   string
	replicas int32
	recreate bool
	stop     sidecar.StopConditions
	// settle is how long the batch settles once rolled out (default 3 s).
	settle time.Duration
	want   string
	// pod is the legacy Pod the Deployment runs.
	pod func(b podBuilder) *corev1.Pod
}

// CheckStopConditions judges sidecar.migration.stop-conditions: the stop
// conditions the restarts case of sidecar.migration.batches does not
// breach are breached here, one each, by a Deployment made for it and
// picked by a label selector: ready latency (a helper that loads for
// 15 s, ReadyWithin 5 s), readiness failures (one that loads for 6 s
// under a 1 s readiness probe, at most 2 failures; one that hangs, alive
// and silent, once ready, none allowed), unavailable replicas
// (2 replicas replaced by Recreate, none may be unavailable) and flush
// loss (a log agent too slow for its app, counted from its sink once the
// replaced Pod is gone; none may be lost). Each migration must stop at
// its first batch, naming the condition, and leave its second batch - a
// bystander picked by another selector - untouched.
func (s *Sidecars) CheckStopConditions(ctx context.Context) promise.Verdict {
	ev, err := s.stopConditions(ctx)
	return verdict("sidecar.migration.stop-conditions", ev, err)
}

func (s *Sidecars) stopConditions(ctx context.Context) ([]string, error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	proxy := func(loadAfter string) func(b podBuilder) *corev1.Pod {
		return func(b podBuilder) *corev1.Pod {
			p := b.container(CrashingSidecar, "proxy", "-load-after", loadAfter)
			p.ReadinessProbe = readyProbe()
			return b.pod(nil, []corev1.Container{b.container("app", "app"), p})
		}
	}
	bounded := sidecar.StopConditions{ReadyWithin: 2 * time.Minute}
	cases := []stopCase{
		{name: "ready-latency", helper: CrashingSidecar, replicas: 1, pod: proxy("15s"),
			stop: sidecar.StopConditions{ReadyWithin: 5 * time.Second}, want: "ReadyWithin 5s breached"},
		{name: "readiness-failures", helper: CrashingSidecar, replicas: 1, pod: proxy("6s"),
			stop: withStop(bounded, func(c *sidecar.StopConditions) { c.MaxReadinessFailures = 2 }), want: "MaxReadinessFailures 2 breached"},
		// Ready, then hung: alive and silent, every readiness probe from
		// then on fails (probeHungAfter after its start: past its first
		// probe, before the batch has settled).
		{name: "hung-helper", helper: CrashingSidecar, replicas: 1, pod: func(b podBuilder) *corev1.Pod {
			p := b.container(CrashingSidecar, "proxy", "-load-after", "0s", "-hang-after", probeHungAfter.String())
			p.ReadinessProbe = readyProbe()
			return b.pod(nil, []corev1.Container{b.container("app", "app"), p})
		}, stop: withStop(bounded, func(c *sidecar.StopConditions) { c.MaxReadinessFailures = 0 }), settle: 6 * time.Second, want: "MaxReadinessFailures 0 breached"},
		{name: "unavailable", helper: CrashingSidecar, replicas: 2, recreate: true, pod: proxy("0s"),
			stop: bounded, want: "MaxUnavailable 0 breached"},
		{name: "flush-loss", helper: "log-agent", replicas: 1, pod: func(b podBuilder) *corev1.Pod {
			agent := b.container("log-agent", "log-agent", "-source", "/shared/app.log", "-sink", "/events/shipped",
				"-interval", "1s", "-per-line", "20ms", "-budget", "1s", "-report", "/events/agent.json")
			return perPod(b.pod(nil, []corev1.Container{b.container("app", "app", "-log", "/shared/app.log", "-rate", "200"), agent}))
		}, stop: withStop(bounded, func(c *sidecar.StopConditions) { c.LostLines = s.lostLines(ns, "flush-loss") }), want: "MaxLostLines 0 breached"},
	}
	bystander := stopCase{name: "bystander", replicas: 1, pod: proxy("0s")}
	before := map[string]corev1.PodTemplateSpec{}
	for _, c := range append(cases, bystander) {
		tmpl, err := s.stopDeployment(ctx, ns, c)
		if err != nil {
			return nil, err
		}
		before[c.name] = tmpl
	}
	for _, c := range append(cases, bystander) {
		if err := s.waitDeployment(ctx, ns, c.name, "available", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == c.replicas }); err != nil {
			return nil, err
		}
	}
	var ev []string
	for _, c := range cases {
		m := &sidecar.Migration{Client: s.cs, Helpers: []string{c.helper}, Stop: c.stop, Settle: cmp.Or(c.settle, 3*time.Second),
			Selections: []sidecar.Selection{{Namespace: ns, LabelSelector: "case=" + c.name}, {Namespace: ns, LabelSelector: "case=" + bystander.name}}}
		results, err := m.Run(ctx)
		if err != nil {
			return ev, fmt.Errorf("%s: %w", c.name, err)
		}
		line, err := stoppedFirst(c.name, c.want, results)
		if err != nil {
			return ev, err
		}
		ev = append(ev, line)
	}
	d, err := s.cs.AppsV1().Deployments(ns).Get(ctx, bystander.name, metav1.GetOptions{})
	if err != nil {
		return ev, err
	}
	if _, touched := d.Annotations[sidecar.LegacyAnnotation]; touched || sidecar.TemplateHash(d.Spec.Template) != sidecar.TemplateHash(before[bystander.name]) {
		return ev, fmt.Errorf("the bystander, every migration's second batch, was changed")
	}
	return append(ev, "the bystander (case=bystander), every migration's second batch, untouched"), nil
}

// stoppedFirst judges sidecar.migration.stop-conditions on the batches
// of the migration of case name (results): stopped at its first, the
// breach naming want.
func stoppedFirst(name, want string, results []sidecar.BatchResult) (string, error) {
	if len(results) != 1 || !strings.Contains(results[0].Breach, want) {
		return "", fmt.Errorf("%s: the migration ran %d batches (%s), want it stopped at the first with %q", name, len(results), describe(results), want)
	}
	return fmt.Sprintf("%s: stopped at the first batch, picked by case=%s: %s", name, name, describe(results)), nil
}

func withStop(c sidecar.StopConditions, change func(*sidecar.StopConditions)) sidecar.StopConditions {
	change(&c)
	return c
}

// stopDeployment creates c's Deployment in ns, labelled case=<name>, with
// a service account of its own, and returns its template as stored.
func (s *Sidecars) stopDeployment(ctx context.Context, ns string, c stopCase) (corev1.PodTemplateSpec, error) {
	pod := c.pod(podBuilder{image: s.image, ns: ns, name: c.name})
	strategy := appsv1.DeploymentStrategy{}
	if c.recreate {
		strategy.Type = appsv1.RecreateDeploymentStrategyType
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: c.name, Labels: map[string]string{"case": c.name}},
		Spec: appsv1.DeploymentSpec{Replicas: &c.replicas, Strategy: strategy, Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
	created, err := s.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	return created.Spec.Template, nil
}

// describe is a migration's batches as evidence.
func describe(results []sidecar.BatchResult) string {
	var parts []string
	for i, r := range results {
		lost := ""
		if len(r.Replaced) > 0 && r.LostLines > 0 {
			lost = fmt.Sprintf(", %d lines lost", r.LostLines)
		}
		parts = append(parts, fmt.Sprintf("batch %d %v: %s, %d restarts, %d readiness failures, worst look: %s%s; breach: %q",
			i+1, r.Targets, r.Took.Round(100*time.Millisecond), r.Restarts, r.ReadinessFailures, r.Unavailable, lost, r.Breach))
	}
	return strings.Join(parts, " | ")
}

// perPod gives each Pod of a template an events directory of its own
// (the Pod's name under the Deployment's), so a replaced Pod's record
// is not mixed with its successor's.
func perPod(pod *corev1.Pod) *corev1.Pod {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			c.Env = append(c.Env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
			for j := range c.VolumeMounts {
				if c.VolumeMounts[j].Name == "events" {
					c.VolumeMounts[j].SubPathExpr = "$(POD_NAME)"
				}
			}
		}
	}
	return pod
}

// lostLines counts, for the Pods of ns's Deployment deploy made by
// perPod, the lines their app wrote that never reached their log agent's
// sink: a sidecar.StopConditions.LostLines.
func (s *Sidecars) lostLines(ns, deploy string) func(context.Context, []corev1.Pod) (int, error) {
	return func(ctx context.Context, replaced []corev1.Pod) (int, error) {
		lost := 0
		for _, p := range replaced {
			node, err := s.c.Node(ctx, p.Spec.NodeName)
			if err != nil {
				return 0, fmt.Errorf("Pod %s ran on %q: %w", p.Name, p.Spec.NodeName, err)
			}
			dir := deploy + "/" + p.Name
			ev, err := events(ctx, node, ns, dir)
			if err != nil {
				return 0, err
			}
			written := appWrote(ev)
			if written == 0 {
				return 0, fmt.Errorf("the app of Pod %s never said how many lines it wrote: %s", p.Name, eventLines(ev))
			}
			shipped, err := linesIn(ctx, node, sidecarEventsDir(ns, dir)+"/shipped")
			if err != nil {
				return 0, err
			}
			lost += max(written-shipped, 0)
		}
		return lost, nil
	}
}
