package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// TestBadInput passes rollouts that must be refused to the library the
// CLI calls, against the real cluster, and checks each left the cluster as
// it was.
func TestBadInput(t *testing.T) {
	f := features.New("bad rollout input changes nothing").WithLabel("area", "rollout").
		Assess("each is refused with a clear error", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			before := snapshot(ctx, t)
			local := &nodeimage.Resolver{Source: nodeimage.SourceLocal}
			surge := rollout.StrategySurge
			for _, c := range []struct {
				in   rollout.RollInput
				want string
			}{
				{rollout.RollInput{To: version.MustParse("v1.37.0"), Strategy: surge}, "more than one minor"},
				{rollout.RollInput{To: version.MustParse("v1.34.0"), Strategy: surge}, "is a downgrade"},
				{rollout.RollInput{To: flagTo, Strategy: "blue-green"}, "unknown strategy"},
				{rollout.RollInput{To: flagTo, Strategy: surge, PauseAfter: -1}, "cannot be negative"},
				{rollout.RollInput{To: version.MustParse("v1.36.99"), Strategy: surge, Images: local}, "skewer images build"},
				// A version the module proxy does not have cannot be built.
				{rollout.RollInput{To: version.MustParse("v1.36.99"), Strategy: surge}, "v1.36.99"},
			} {
				out := &watchWriter{t: t}
				c.in.Runner = &rollout.Runner{Out: out}
				err := rollout.Roll(ctx, s.Cluster, c.in)
				t.Logf("rollout to %s (%s) -> %v", c.in.To, c.in.Strategy, err)
				g.Expect(err).To(MatchError(ContainSubstring(c.want)), "rollout to %s", c.in.To)
				g.Expect(c.in.Runner.Steps).To(BeEmpty(), "a refused rollout runs no step")
				g.Expect(snapshot(ctx, t)).To(Equal(before), "rollout to %s changed the cluster", c.in.To)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// TestInterrupted stops a rollout in the middle of a node's kubeadm join,
// the way Ctrl-C does, then checks that every control plane can still be
// accounted for and that a rollback recovers from there: the half-joined
// node and its etcd member gone, every control plane back at the old
// version, nothing cordoned, the objects from before intact.
func TestInterrupted(t *testing.T) {
	var from version.Version
	var before *corev1.ConfigMap
	var snap string
	f := features.New("an interrupted rollout is recovered by a rollback").WithLabel("area", "rollout").WithLabel("disruptive", "true").WithLabel("slow", "true").
		WithLabel(suite.RestartsLabel, restarts.ControlPlane).
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			var err error
			from, err = rollout.ClusterVersion(ctx, s.Cluster)
			g.Expect(err).NotTo(HaveOccurred())
			before, err = certification.MarkBefore(ctx, s.Cluster, from)
			g.Expect(err).NotTo(HaveOccurred())
			snap = snapshot(ctx, t)
			return ctx
		}).
		Assess("a cancel during the join leaves every control plane accounted for", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			// Cancel 5 s into the first kubeadm join, as a user's Ctrl-C would.
			out := &watchWriter{t: t, on: "join the new node with kubeadm ...", do: func() { time.AfterFunc(5*time.Second, cancel) }}
			err := rollout.Roll(rctx, s.Cluster, rollout.RollInput{To: flagTo, Strategy: rollout.StrategySurge, Runner: &rollout.Runner{Out: out}})
			g.Expect(err).To(MatchError(context.Canceled), "the rollout was interrupted")
			rec, err := rollout.LoadRecord(s.Cluster)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rec).NotTo(BeNil(), "the record a rollback returns by")
			g.Expect(rec.From).To(Equal(from))
			members, err := rollout.Census(ctx, s.Cluster)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("right after the interruption:\n%s", rollout.Describe(members))
			g.Expect(members).To(HaveLen(4), "three old control planes and the half-joined one")
			return ctx
		}).
		Assess("a rollback recovers to every control plane at the old version", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			g := NewWithT(t)
			err := rollout.Rollback(ctx, s.Cluster, rollout.RollbackInput{Runner: &rollout.Runner{Out: &watchWriter{t: t}}})
			g.Expect(err).NotTo(HaveOccurred(), "rollback")
			expectVersions(ctx, t, map[version.Version]int{from: 3})
			g.Expect(rollout.CheckMembership(ctx, s.Cluster)).To(Succeed())
			g.Expect(snapshot(ctx, t)).To(Equal(snap), "control planes, ClusterConfiguration, cordons and record as before the rollout")
			g.Expect(certification.Intact(ctx, s.Cluster, before)).To(Succeed())
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// snapshot is what a refused or recovered rollout must leave unchanged:
// the cluster's containers, the version in its ClusterConfiguration, how
// many control planes run each version, which nodes are cordoned, and the
// rollout record.
func snapshot(ctx context.Context, t *testing.T) string {
	g := NewWithT(t)
	var b strings.Builder
	v, err := rollout.ClusterVersion(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	b.WriteString("ClusterConfiguration " + v.String() + "\n")
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	var running []string
	for _, v := range versions {
		running = append(running, "control plane "+v.String()+"\n")
	}
	slices.Sort(running)
	b.WriteString(strings.Join(running, ""))
	rec, err := rollout.LoadRecord(s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(&b, "rollout record %+v\n", rec)
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
