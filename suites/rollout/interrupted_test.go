package rollout

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/internal/cli"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// TestBadInput passes the CLI rollouts it must refuse, against the real
// cluster, and checks each left the cluster as it was.
func TestBadInput(t *testing.T) {
	f := features.New("bad rollout input changes nothing").
		Assess("each is refused with one clear line", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			before := snapshot(ctx, t)
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"rollout", "--to", "v1.37.0"}, "more than one minor"},
				{[]string{"rollout", "--to", "v1.34.0"}, "is a downgrade"},
				{[]string{"rollout", "--to", "v1.36.3", "--strategy", "blue-green"}, "unknown strategy"},
				{[]string{"rollout", "--to", "v1.36.99", "--image-source", "local"}, "skewer images build"},
				// A version the module proxy does not have cannot be built.
				{[]string{"rollout", "--to", "v1.36.99"}, "v1.36.99"},
			} {
				args := append(c.args, "--name", s.Cluster.Name)
				var stderr bytes.Buffer
				code := cli.Run(ctx, args, &bytes.Buffer{}, &stderr)
				t.Logf("skewer %s -> exit %d\n%s", strings.Join(args, " "), code, lastLines(stderr.String(), 3))
				g.Expect(code).NotTo(BeZero(), "skewer %v", args)
				g.Expect(stderr.String()).To(ContainSubstring(c.want))
				g.Expect(snapshot(ctx, t)).To(Equal(before), "skewer %v changed the cluster", args)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// TestInterrupted stops `skewer rollout` in the middle of a node's kubeadm
// join, the way Ctrl-C does, then checks that the command said where every
// control plane stands and that `skewer rollback` recovers from there: the
// half-joined node and its etcd member gone, every control plane back at
// the old version, nothing cordoned, the objects from before intact.
func TestInterrupted(t *testing.T) {
	var from string
	var before *corev1.ConfigMap
	var snap string
	f := features.New("an interrupted rollout is recovered by skewer rollback").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			var err error
			from, err = s.Cluster.KubernetesVersion(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			before, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "before-interrupted-"}, Data: map[string]string{"from": from}}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			snap = snapshot(ctx, t)
			return ctx
		}).
		Assess("Ctrl-C during the join leaves a report of every control plane", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			// Cancel 5 s into the first kubeadm join, as a user's Ctrl-C would.
			out := &watchWriter{t: t, on: "join the new node with kubeadm ...", do: func() { time.AfterFunc(5*time.Second, cancel) }}
			code := cli.Run(rctx, []string{"rollout", "--name", s.Cluster.Name, "--to", *flagTo, "--image-source", "local"}, out, out)
			g.Expect(code).NotTo(BeZero(), "the rollout was interrupted")
			g.Expect(out.String()).To(ContainSubstring("control planes after:"))
			g.Expect(out.String()).To(ContainSubstring("skewer rollback --name " + s.Cluster.Name))
			members, err := rollout.Census(ctx, s.Cluster)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("right after the interruption:\n%s", rollout.Describe(members))
			g.Expect(members).To(HaveLen(4), "three old control planes and the half-joined one")
			return ctx
		}).
		Assess("skewer rollback recovers to every control plane at the old version", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			out := &watchWriter{t: t}
			code := cli.Run(ctx, []string{"rollback", "--name", s.Cluster.Name, "--image-source", "local"}, out, out)
			g.Expect(code).To(BeZero(), "skewer rollback")
			expectVersions(ctx, t, map[string]int{from: 3})
			g.Expect(rollout.CheckMembership(ctx, s.Cluster)).To(Succeed())
			g.Expect(snapshot(ctx, t)).To(Equal(snap), "control planes, ClusterConfiguration and cordons as before the rollout")
			cs, err := s.Cluster.Client()
			g.Expect(err).NotTo(HaveOccurred())
			got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, before.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.UID).To(Equal(before.UID))
			g.Expect(got.Data).To(Equal(before.Data))
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// snapshot is what a refused or recovered rollout must leave unchanged:
// the cluster's containers, the version in its ClusterConfiguration, how
// many control planes run each version, and which nodes are cordoned.
func snapshot(ctx context.Context, t *testing.T) string {
	g := NewWithT(t)
	var b strings.Builder
	v, err := s.Cluster.KubernetesVersion(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	b.WriteString("ClusterConfiguration " + v + "\n")
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	count := map[string]int{}
	for _, v := range versions {
		count[v]++
	}
	for v, n := range count {
		b.WriteString(strings.Repeat("control plane "+v+"\n", n))
	}
	names, err := docker.Containers(ctx, "label=io.x-k8s.kind.cluster="+s.Cluster.Name)
	g.Expect(err).NotTo(HaveOccurred())
	b.WriteString("containers " + strings.Join(names, ",") + "\n")
	cs, err := s.Cluster.Client()
	g.Expect(err).NotTo(HaveOccurred())
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			b.WriteString("cordoned " + n.Name + "\n")
		}
	}
	return b.String()
}

// watchWriter logs what it is given, keeps it, and calls do once when a
// line contains on.
type watchWriter struct {
	t    *testing.T
	on   string
	do   func()
	mu   sync.Mutex
	buf  strings.Builder
	done bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	if w.on != "" && !w.done && strings.Contains(string(p), w.on) {
		w.done = true
		w.do()
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
