package certification

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// RolloutPromises are the promises about rollouts themselves that
// CheckRefusesBadInput and CheckInterruptedRecovers judge on a cluster
// whose control planes all run the pair's older version.
var RolloutPromises = []promise.ID{"rollout.refuses-bad-input", "rollout.interrupted-recovers"}

// CheckRefusesBadInput judges rollout.refuses-bad-input: rollouts the skew
// policy or the input forbids - two minors up from pair.From, one minor
// down, an unknown strategy, a negative pause, a version with no local
// node image, a version the Go module proxy does not serve - are each
// refused with an error that says why, run no step, and leave the cluster
// as it was (Snapshot).
func CheckRefusesBadInput(ctx context.Context, c *cluster.Cluster, pair promise.Pair) promise.Verdict {
	const id = "rollout.refuses-bad-input"
	before, err := Snapshot(ctx, c)
	if err != nil {
		return fail(id, "%v", err)
	}
	at := func(major, minor uint, patch string) version.Version {
		return version.MustParse(fmt.Sprintf("v%d.%d.%s", major, minor, patch))
	}
	from, to := pair.From, pair.To
	missing := at(to.Major(), to.Minor(), "99") // no such patch release
	surge := rollout.StrategySurge
	var ev []string
	for _, tc := range []struct {
		in   rollout.RollInput
		want string
	}{
		{rollout.RollInput{To: at(from.Major(), from.Minor()+2, "0"), Strategy: surge}, "more than one minor"},
		{rollout.RollInput{To: at(from.Major(), from.Minor()-1, "0"), Strategy: surge}, "is a downgrade"},
		{rollout.RollInput{To: to, Strategy: "blue-green"}, "unknown strategy"},
		{rollout.RollInput{To: to, Strategy: surge, PauseAfter: -1}, "cannot be negative"},
		{rollout.RollInput{To: missing, Strategy: surge, Images: &nodeimage.Resolver{Source: nodeimage.SourceLocal}}, "skewer images build"},
		{rollout.RollInput{To: missing, Strategy: surge}, missing.String()},
	} {
		tc.in.Runner = &rollout.Runner{Out: io.Discard}
		err := rollout.Roll(ctx, c, tc.in)
		what := fmt.Sprintf("a rollout to %s (%s, pause after %d)", tc.in.To, tc.in.Strategy, tc.in.PauseAfter)
		if v := refusal(what, tc.want, err, len(tc.in.Runner.Steps)); v != nil {
			return *v
		}
		after, serr := Snapshot(ctx, c)
		if serr != nil {
			return fail(id, "%v", serr)
		}
		if v := unchanged(what, before, after); v != nil {
			return *v
		}
		ev = append(ev, fmt.Sprintf("%s: %v", what, err))
	}
	ev = append(ev, "the cluster unchanged after each (containers, ClusterConfiguration, versions, cordons, rollout record)")
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}

// refusal judges rollout.refuses-bad-input on how what (a rollout the
// input forbids) ended: err, which must say want, after steps steps,
// which must be none. Nil when it was refused so.
func refusal(what, want string, err error, steps int) *promise.Verdict {
	const id = "rollout.refuses-bad-input"
	var v promise.Verdict
	switch {
	case err == nil:
		v = fail(id, "%s was not refused", what)
	case !strings.Contains(err.Error(), want):
		v = fail(id, "%s was refused with %q, which does not say %q", what, err, want)
	case steps > 0:
		v = fail(id, "%s was refused after %d step(s)", what, steps)
	default:
		return nil
	}
	return &v
}

// unchanged judges rollout.refuses-bad-input on the cluster's Snapshot
// before and after what was refused. Nil when they are the same.
func unchanged(what, before, after string) *promise.Verdict {
	if after == before {
		return nil
	}
	v := fail("rollout.refuses-bad-input", "%s was refused but changed the cluster: before\n%s\nafter\n%s", what, before, after)
	return &v
}

// CheckInterruptedRecovers judges rollout.interrupted-recovers: a surge
// rollout to pair.To is cancelled 5 s into its first kubeadm join, as a
// user's Ctrl-C would; every control plane must then be accounted for
// (the three old ones and the half-joined one, the record of where the
// rollout began kept), and a rollback must bring the cluster back to what
// Snapshot saw before, every control plane at pair.From, membership
// consistent, and before (an object made earlier, MarkBefore) intact. out
// receives the rollouts' steps.
func CheckInterruptedRecovers(ctx context.Context, c *cluster.Cluster, pair promise.Pair, images *nodeimage.Resolver, before *corev1.ConfigMap, out io.Writer) promise.Verdict {
	const id = "rollout.interrupted-recovers"
	snap, err := Snapshot(ctx, c)
	if err != nil {
		return fail(id, "%v", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cancelled time.Time
	r := &rollout.Runner{Out: out, OnStep: func(_ context.Context, step string) {
		if cancelled.IsZero() && strings.HasPrefix(step, "join the new node with kubeadm") {
			cancelled = time.Now().Add(5 * time.Second)
			time.AfterFunc(5*time.Second, cancel)
		}
	}}
	err = rollout.Roll(rctx, c, rollout.RollInput{To: pair.To, Strategy: rollout.StrategySurge, Images: images, Runner: r})
	if !errors.Is(err, context.Canceled) {
		return fail(id, "the rollout was to be cancelled 5 s into its first join; it ended with %v", orOK(err))
	}
	if ctx.Err() != nil {
		return fail(id, "%v", ctx.Err())
	}
	rec, err := rollout.LoadRecord(c)
	switch {
	case err != nil:
		return fail(id, "the rollout's record after the interruption: %v", err)
	case rec == nil || !rec.From.Equal(pair.From):
		return fail(id, "after the interruption the record a rollback returns by says %+v, want a rollout from %s", rec, pair.From)
	}
	members, err := rollout.Census(ctx, c)
	if err != nil {
		return fail(id, "%v", err)
	}
	ev := []string{fmt.Sprintf("cancelled 5 s into the first kubeadm join, after %d step(s); every control plane accounted for:\n%s", len(r.Steps), rollout.Describe(members))}
	if len(members) != 4 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf("%d control planes after the interruption, want the three old ones and the half-joined one", len(members))}
	}
	start := time.Now()
	if err := rollout.Rollback(ctx, c, rollout.RollbackInput{Images: images, Runner: &rollout.Runner{Out: out}}); err != nil {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf("the rollback: %v", err)}
	}
	versions, err := allAt(ctx, c, pair.From)
	if err == nil {
		err = rollout.CheckMembership(ctx, c)
	}
	if err == nil {
		err = Intact(ctx, c, before)
	}
	if err != nil {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf("after the rollback: %v", err)}
	}
	after, err := Snapshot(ctx, c)
	if err != nil {
		return fail(id, "%v", err)
	}
	return recoveredVerdict(ev, snap, after, time.Since(start), versions)
}

// recoveredVerdict judges rollout.interrupted-recovers once the rollback
// of the interrupted rollout is done, in took, leaving the control planes
// at versions: the cluster's Snapshot after it must be the one before the
// rollout. ev is what was seen so far.
func recoveredVerdict(ev []string, before, after string, took time.Duration, versions map[string]version.Version) promise.Verdict {
	const id = "rollout.interrupted-recovers"
	if after != before {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf("the rollback left the cluster other than before the rollout: before\n%s\nafter\n%s", before, after)}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: append(ev, fmt.Sprintf(
		"rolled back in %s: %v, membership consistent, the object from before intact, and the cluster as before the rollout", took.Round(time.Second), versions))}
}

// Snapshot is what a refused or recovered rollout must leave as it was:
// the version in c's ClusterConfiguration, how many control planes run
// each version, the rollout record, the cluster's containers, and which
// nodes are cordoned.
func Snapshot(ctx context.Context, c *cluster.Cluster) (string, error) {
	var b strings.Builder
	v, err := rollout.ClusterVersion(ctx, c)
	if err != nil {
		return "", err
	}
	b.WriteString("ClusterConfiguration " + v.String() + "\n")
	versions, err := rollout.NodeVersions(ctx, c)
	if err != nil {
		return "", err
	}
	var running []string
	for _, v := range versions {
		running = append(running, "control plane "+v.String()+"\n")
	}
	slices.Sort(running)
	b.WriteString(strings.Join(running, ""))
	rec, err := rollout.LoadRecord(c)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "rollout record %+v\n", rec)
	names, err := docker.Containers(ctx, "label=io.x-k8s.kind.cluster="+c.Name)
	if err != nil {
		return "", err
	}
	b.WriteString("containers " + strings.Join(names, ",") + "\n")
	cs, err := c.Client()
	if err != nil {
		return "", err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			b.WriteString("cordoned " + n.Name + "\n")
		}
	}
	return b.String(), nil
}
