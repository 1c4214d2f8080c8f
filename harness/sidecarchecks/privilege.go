package sidecarchecks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/sidecar"
)

// The hardened Pod: an app and its proxy helper, both as the Pod Security
// Standard "restricted" asks (non-root, no privilege escalation, every
// capability dropped, the runtime's seccomp profile) and with a read-only
// root filesystem; the Pod's own service account, no token mounted by
// default, and one projected into the app alone - the helper needs none.
const (
	hardenedUID      = 65532
	hardenedAccount  = "hardened"
	appTokenPath     = "/var/run/secrets/tokens"
	defaultTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// restricted labels a namespace whose Pods the API server admits only
// under the Pod Security Standard "restricted", init containers and
// native sidecars included.
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// CheckLeastPrivilege judges sidecar.least-privilege on every kubelet at
// once: a hardened helper, migrated to a native sidecar by the migration
// (in a namespace that enforces "restricted", so its preflight dry run
// and the ReplicaSet's Pods pass Pod Security admission), keeps its least
// privilege in the Pod the API server admitted and at runtime, as the
// node's kernel shows the process the kubelet started.
//
// Who may reach the helper on the network is sidecar.network-policy's.
func (s *Sidecars) CheckLeastPrivilege(ctx context.Context) promise.Verdict {
	return s.onEachAtOnce(ctx, "sidecar.least-privilege", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, restricted)
		if err != nil {
			return nil, err
		}
		defer done()
		pod, err := s.migratedHardened(ctx, ns, k)
		if err != nil {
			return nil, err
		}
		helper, err := privilegesOf(ctx, k.Node, pod, HelperProxy)
		if err != nil {
			return nil, err
		}
		app, err := privilegesOf(ctx, k.Node, pod, "app")
		if err != nil {
			return nil, err
		}
		return judgeLeastPrivilege(pod, helper, app)
	})
}

// HelperProxy is the helper the least-privilege check migrates.
const HelperProxy = "proxy"

// migratedHardened runs the hardened Deployment on k, migrates its helper
// to a native sidecar, and returns the Pod that runs it.
func (s *Sidecars) migratedHardened(ctx context.Context, ns string, k Kubelet) (*corev1.Pod, error) {
	if _, err := s.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: hardenedAccount}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	d := hardenedDeployment(podBuilder{image: s.image, ns: ns, name: "hardened", node: k.Name})
	if _, err := s.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("the hardened Deployment was refused: %w", err)
	}
	if err := s.waitDeployment(ctx, ns, d.Name, "available", func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 }); err != nil {
		return nil, err
	}
	tg := sidecar.Target{Namespace: ns, Name: d.Name}
	m := &sidecar.Migration{Client: s.cs, Helpers: []string{HelperProxy}, Batches: [][]sidecar.Target{{tg}},
		Stop: sidecar.StopConditions{ReadyWithin: 2 * time.Minute}}
	results, err := m.Run(ctx)
	if err != nil {
		return nil, err
	}
	if len(results) != 1 || results[0].Breach != "" {
		return nil, fmt.Errorf("the migration of %s: %+v", tg, results)
	}
	pods, err := sidecar.PodsOf(ctx, s.cs, []sidecar.Target{tg})
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if sidecar.Admitted(p.Spec, m.Helpers) == nil {
			return &p, nil
		}
	}
	return nil, fmt.Errorf("no Pod of %s runs its migrated template", tg)
}

// hardenedDeployment is the legacy Deployment of the hardened Pod: the
// app and the proxy helper as regular containers, pinned by b.
func hardenedDeployment(b podBuilder) *appsv1.Deployment {
	app := hardened(b.container("app", "app", "-events", ""))
	app.VolumeMounts = []corev1.VolumeMount{{Name: "app-token", MountPath: appTokenPath, ReadOnly: true}}
	proxy := hardened(b.container(HelperProxy, "proxy", "-events", "", "-load-after", "0s"))
	proxy.VolumeMounts = nil
	pod := b.pod(nil, []corev1.Container{app, proxy})
	hour, no, uid := int64(3600), false, int64(hardenedUID)
	yes := true
	pod.Spec.ServiceAccountName = hardenedAccount
	pod.Spec.AutomountServiceAccountToken = &no
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	// "restricted" admits no hostPath: the fixtures record no events here.
	pod.Spec.Volumes = []corev1.Volume{{Name: "app-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &hour}}}}}}}
	one := int32(1)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
}

// hardened is c with the least privilege a helper needs.
func hardened(c corev1.Container) corev1.Container {
	no, yes := false, true
	c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	return c
}

// Privileges are what a container's process runs with, as its node's
// kernel shows it (/proc/PID/status and mountinfo).
type Privileges struct {
	Container string
	PID       int
	// UID is the status's Uid line: real, effective, saved, filesystem.
	UID        []string
	CapEff     string
	NoNewPrivs string
	// Seccomp is the status's Seccomp mode: 2 is a filter.
	Seccomp string
	// RootReadOnly: the process's root is mounted read-only.
	RootReadOnly bool
	// Mounts are the process's mount points.
	Mounts []string
}

// privilegesOf reads, on node, what pod's container name runs with.
func privilegesOf(ctx context.Context, node cluster.Node, pod *corev1.Pod, name string) (Privileges, error) {
	p := Privileges{Container: name}
	var id string
	for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if st.Name == name {
			_, id, _ = strings.Cut(st.ContainerID, "://")
		}
	}
	if id == "" {
		return p, fmt.Errorf("Pod %s/%s: no running container %s; %s", pod.Namespace, pod.Name, name, containerStates(pod))
	}
	raw, err := node.Run(ctx, "crictl", "inspect", "-o", "json", id)
	if err != nil {
		return p, fmt.Errorf("crictl inspect %s on %s: %w", name, node.Name, err)
	}
	var inspect struct {
		Info struct{ Pid int } `json:"info"`
	}
	if err := json.Unmarshal([]byte(raw), &inspect); err != nil || inspect.Info.Pid == 0 {
		return p, fmt.Errorf("crictl inspect %s on %s: no pid (%v)", name, node.Name, err)
	}
	p.PID = inspect.Info.Pid
	status, err := node.Run(ctx, "cat", fmt.Sprintf("/proc/%d/status", p.PID))
	if err != nil {
		return p, err
	}
	mountinfo, err := node.Run(ctx, "cat", fmt.Sprintf("/proc/%d/mountinfo", p.PID))
	if err != nil {
		return p, err
	}
	return p.read(status, mountinfo), nil
}

// read fills p from a process's /proc status and mountinfo.
func (p Privileges) read(status, mountinfo string) Privileges {
	for _, line := range strings.Split(status, "\n") {
		key, value, _ := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch key {
		case "Uid":
			p.UID = strings.Fields(value)
		case "CapEff":
			p.CapEff = value
		case "NoNewPrivs":
			p.NoNewPrivs = value
		case "Seccomp":
			p.Seccomp = value
		}
	}
	// ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS ...
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		p.Mounts = append(p.Mounts, f[4])
		if f[4] == "/" {
			p.RootReadOnly = slices.Contains(strings.Split(f[5], ","), "ro")
		}
	}
	return p
}

func (p Privileges) String() string {
	return fmt.Sprintf("%s (pid %d): uid %s, CapEff %s, NoNewPrivs %s, Seccomp %s, root read-only %v",
		p.Container, p.PID, strings.Join(p.UID, "/"), p.CapEff, p.NoNewPrivs, p.Seccomp, p.RootReadOnly)
}

// tokens are p's mount points that hold a service account token of pod:
// the default path, and every path a projected token is mounted at.
func (p Privileges) tokens(pod *corev1.Pod) []string {
	paths := []string{defaultTokenPath}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil || !slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }) {
			continue
		}
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					paths = append(paths, m.MountPath)
				}
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(p.Mounts), func(m string) bool { return !slices.Contains(paths, m) })
}

// judgeLeastPrivilege judges sidecar.least-privilege on the Pod the
// migration made and what its helper and app run with. The app's token is
// the floor: a check that cannot see the token the app has proves nothing
// by seeing none in the helper.
func judgeLeastPrivilege(pod *corev1.Pod, helper, app Privileges) ([]string, error) {
	if len(app.tokens(pod)) == 0 {
		return nil, unjudged("the app's projected token is not among its mounts %v: the helper's lack of one shows nothing", app.Mounts)
	}
	var errs []error
	if err := sidecar.Admitted(pod.Spec, []string{helper.Container}); err != nil {
		errs = append(errs, err)
	}
	if sa := pod.Spec.ServiceAccountName; sa == "" || sa == "default" {
		errs = append(errs, fmt.Errorf("the Pod runs as service account %q, not one of its own", sa))
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		errs = append(errs, errors.New("the Pod mounts its service account's token into every container (automountServiceAccountToken not false)"))
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == helper.Container {
			errs = append(errs, specPrivileges(pod.Spec.SecurityContext, c)...)
		}
	}
	errs = append(errs, runtimePrivileges(helper)...)
	if t := helper.tokens(pod); len(t) > 0 {
		errs = append(errs, fmt.Errorf("%s has a service account token mounted at %v", helper.Container, t))
	}
	ev := []string{fmt.Sprintf("Pod %s/%s (service account %s) admitted under Pod Security %q; %v; no token among its %d mounts, while the app's is at %v",
		pod.Namespace, pod.Name, pod.Spec.ServiceAccountName, restricted["pod-security.kubernetes.io/enforce"], helper, len(helper.Mounts), app.tokens(pod))}
	return ev, errors.Join(errs...)
}

// specPrivileges are what c, a container of a Pod with the security
// context pod, asks beyond least privilege.
func specPrivileges(pod *corev1.PodSecurityContext, c corev1.Container) []error {
	var errs []error
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil && pod != nil {
		nonRoot = pod.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		errs = append(errs, fmt.Errorf("%s: runAsNonRoot is not true", c.Name))
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		errs = append(errs, fmt.Errorf("%s: readOnlyRootFilesystem is not true", c.Name))
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		errs = append(errs, fmt.Errorf("%s: allowPrivilegeEscalation is not false", c.Name))
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		errs = append(errs, fmt.Errorf("%s: capabilities %+v, want none added and ALL dropped", c.Name, sc.Capabilities))
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == defaultTokenPath {
			errs = append(errs, fmt.Errorf("%s mounts %s at %s", c.Name, m.Name, m.MountPath))
		}
	}
	return errs
}

// runtimePrivileges are what p's process runs with beyond least privilege.
func runtimePrivileges(p Privileges) []error {
	var errs []error
	if len(p.UID) != 4 || slices.Contains(p.UID, "0") {
		errs = append(errs, fmt.Errorf("%s runs with uid %v, want no root among real, effective, saved and filesystem", p.Container, p.UID))
	}
	if strings.Trim(p.CapEff, "0") != "" || p.CapEff == "" {
		errs = append(errs, fmt.Errorf("%s has effective capabilities %q, want none", p.Container, p.CapEff))
	}
	if p.NoNewPrivs != "1" {
		errs = append(errs, fmt.Errorf("%s: NoNewPrivs %q, want 1 (no privilege escalation)", p.Container, p.NoNewPrivs))
	}
	if p.Seccomp != "2" {
		errs = append(errs, fmt.Errorf("%s: Seccomp mode %q, want 2 (a filter)", p.Container, p.Seccomp))
	}
	if !p.RootReadOnly {
		errs = append(errs, fmt.Errorf("%s: its root filesystem is mounted read-write", p.Container))
	}
	return errs
}
