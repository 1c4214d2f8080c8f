// Package unplanned is a suite that does what it does not declare: it
// kills CoreDNS, restarts a kubelet, runs a Pod the kernel kills for
// memory and one its kubelet evicts for disk, in a feature with no
// restarts label. suites/smoke runs it against its own cluster and expects it to
// fail, name each, export its evidence and leave nothing running. It is
// under testdata so that ./... never runs it on its own.
package unplanned

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/suite"
)

var s *suite.Suite

func TestMain(m *testing.M) { suite.Main(m, "ha", &s) }

// namespace carries the suite's namespace from the step that makes it to
// the teardown that deletes it.
type namespace struct{}

// hog is a Pod of one fixture container that grows as args say.
func hog(image, name string, args []string, limits corev1.ResourceList, volumes []corev1.Volume, mounts []corev1.VolumeMount) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Volumes: volumes,
		Containers: []corev1.Container{{Name: "hog", Image: image, ImagePullPolicy: corev1.PullNever, Args: append([]string{"hog"}, args...),
			Resources: corev1.ResourceRequirements{Limits: limits, Requests: limits}, VolumeMounts: mounts}}}}
}

func TestUnplanned(t *testing.T) {
	var image string
	f := features.New("kills what it does not declare").
		// First, so that its eviction comes while the rest runs: the
		// kubelet measures an emptyDir's usage on its volume stats period
		// (volumeStatsAggPeriod, 1 min by default) and evicts the Pod
		// once it is past the volume's sizeLimit (local storage capacity
		// isolation); the file grows well past it at once.
		Assess("a Pod its kubelet will evict for disk", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			var err error
			image, err = (&nodeimage.Builder{Out: suite.LogWriter(t)}).FixtureImage(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Cluster.LoadImages(ctx, image)).To(Succeed())
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "unplanned-"}}
			ns, err = cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			ctx = context.WithValue(ctx, namespace{}, ns.Name)
			sizeLimit := resource.MustParse("2Mi")
			disk := hog(image, "filler", []string{"-dir=/fill", "-step=1048576", "-every=100ms", "-limit=16777216"}, nil,
				[]corev1.Volume{{Name: "fill", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &sizeLimit}}}},
				[]corev1.VolumeMount{{Name: "fill", MountPath: "/fill"}})
			_, err = cs.CoreV1().Pods(ns.Name).Create(ctx, disk, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			return ctx
		}).
		Assess("CoreDNS killed and a kubelet restarted from outside", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).NotTo(BeEmpty())
			victim := pods.Items[0]
			node, err := s.Cluster.Node(ctx, victim.Spec.NodeName)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("killing every coredns on %s and restarting its kubelet", node.Name)
			_, err = node.Run(ctx, "pkill", "-9", "-x", "coredns")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = node.Run(ctx, "systemctl", "restart", "kubelet")
			g.Expect(err).NotTo(HaveOccurred())
			// Seen before the suite ends, so its verdict has them.
			g.Eventually(s.Events).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(And(
				ContainElement(HaveField("Pod", victim.Name)),
				ContainElement(And(HaveField("Kind", restarts.Kubelet), HaveField("Node", node.Name)))))
			return ctx
		}).
		Assess("a container killed for memory, and the Pod its kubelet evicts for disk", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			ns, _ := ctx.Value(namespace{}).(string)
			g.Expect(ns).NotTo(BeEmpty(), "the first step made the namespace")
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			memory := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("24Mi")}
			// The memory hog grows 1 MiB every 200 ms, so the kernel kills
			// it seconds after its start: a container killed within moments
			// of its start can lose its OOMKilled reason to a race in
			// containerd (its status says Error, exit code 137;
			// containerd#8180, kubernetes#119600), which CI met once with the
			// fixture's default of 8 MiB every 50 ms.
			slowly := []string{"-step=1048576", "-every=200ms"}
			_, err = cs.CoreV1().Pods(ns).Create(ctx, hog(image, "hog", slowly, memory, nil, nil), metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			seen := func() []string {
				var out []string
				for _, e := range s.Events() {
					out = append(out, e.String())
				}
				return out
			}
			g.Eventually(seen).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(And(
				ContainElement(MatchRegexp(`/hog container hog on \S+ killed for memory`)),
				ContainElement(MatchRegexp(`/filler on \S+ evicted by its kubelet`))),
				"the kernel kills the hog at 24Mi, the kubelet evicts the filler past its 2Mi emptyDir")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if ns, _ := ctx.Value(namespace{}).(string); ns != "" {
				if cs, err := s.Cluster.Client(); err == nil {
					_ = cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
				}
			}
			return ctx
		}).
		Feature()
	s.Env.Test(t, f)
}
