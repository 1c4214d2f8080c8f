package certification

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// fail is a failed verdict that says what went wrong.
// underFault is the floor of a check that judges each request it made
// under a fault (answered, and how): it must have made one. The probes
// make tens on a cadence; none made - the fault's window closed before
// the first, a context cut short - proves nothing, and passes nothing.
func underFault(id promise.ID, what string, n int) *promise.Verdict {
	if n >= 1 {
		return nil
	}
	v := promise.NothingObserved(id, 1, what, n)
	return &v
}

func fail(id promise.ID, format string, args ...any) promise.Verdict {
	return promise.Verdict{ID: id, Outcome: promise.Fail, Reason: fmt.Sprintf(format, args...)}
}

// MarkBefore makes an object the end of the transitions must find intact.
func MarkBefore(ctx context.Context, c *cluster.Cluster, from version.Version) (*corev1.ConfigMap, error) {
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "skewer-before-"}, Data: map[string]string{"from": from.String()}}, metav1.CreateOptions{})
}

// Intact says how before differs from what the cluster holds now; a nil
// before (a run that began mid-transition made none) has nothing to differ.
func Intact(ctx context.Context, c *cluster.Cluster, before *corev1.ConfigMap) error {
	if before == nil {
		return nil
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	got, err := cs.CoreV1().ConfigMaps(before.Namespace).Get(ctx, before.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("ConfigMap %s from before: %w", before.Name, err)
	case got.UID != before.UID:
		return fmt.Errorf("ConfigMap %s has UID %s, made as %s", before.Name, got.UID, before.UID)
	case fmt.Sprint(got.Data) != fmt.Sprint(before.Data):
		return fmt.Errorf("ConfigMap %s holds %v, made with %v", before.Name, got.Data, before.Data)
	}
	return nil
}

// CheckMembership judges rollout.membership after a step: etcd members,
// identity leases and load-balancer backends equal the control planes.
func CheckMembership(ctx context.Context, c *cluster.Cluster, after string) promise.Verdict {
	return membershipVerdict(after, rollout.CheckMembership(ctx, c))
}

// membershipVerdict judges rollout.membership after a step on how the
// members compared with the control planes (rollout.CheckMembership).
func membershipVerdict(after string, err error) promise.Verdict {
	if err != nil {
		return fail("rollout.membership", "after %s: %v", after, err)
	}
	return promise.Verdict{ID: "rollout.membership", Outcome: promise.Pass, Evidence: []string{"after " + after}}
}

// allAt says which control planes' own apiservers report another version
// than want.
func allAt(ctx context.Context, c *cluster.Cluster, want version.Version) (map[string]version.Version, error) {
	versions, err := rollout.NodeVersions(ctx, c)
	if err != nil {
		return nil, err
	}
	return versions, offVersion(versions, want)
}

// offVersion says which control planes of versions (each one's own
// apiserver's) run another version than want.
func offVersion(versions map[string]version.Version, want version.Version) error {
	var off []string
	for n, v := range versions {
		if v != want {
			off = append(off, n+" at "+v.String())
		}
	}
	if len(off) > 0 {
		sort.Strings(off)
		return fmt.Errorf("not at %s: %s", want, strings.Join(off, ", "))
	}
	return nil
}

// CheckVersions judges rollout.versions: every control plane's own
// apiserver reports want, and the object from before is intact.
func CheckVersions(ctx context.Context, c *cluster.Cluster, want version.Version, before *corev1.ConfigMap) promise.Verdict {
	versions, err := allAt(ctx, c, want)
	if err == nil {
		err = Intact(ctx, c, before)
	}
	return versionsVerdict("rollout.versions", versions, err)
}

// versionsVerdict is id's verdict on the control planes' versions and
// what was found wrong with them or with the object from before.
func versionsVerdict(id promise.ID, versions map[string]version.Version, err error) promise.Verdict {
	if err != nil {
		return fail(id, "%v", err)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{fmt.Sprint(versions)}}
}

// CheckRollback judges rollout.rollback: every control plane back at from,
// the rollout record gone, the object from before intact.
func CheckRollback(ctx context.Context, c *cluster.Cluster, from version.Version, before *corev1.ConfigMap) promise.Verdict {
	versions, err := allAt(ctx, c, from)
	if err == nil {
		err = Intact(ctx, c, before)
	}
	if err == nil {
		err = leftRecord(rollout.LoadRecord(c))
	}
	return versionsVerdict("rollout.rollback", versions, err)
}

// leftRecord says what is wrong with the rollout record a finished
// rollback found (rec, or the error reading it): any record at all.
func leftRecord(rec *rollout.Record, err error) error {
	if err == nil && rec != nil {
		err = fmt.Errorf("a finished rollback left its rollout record (from %s)", rec.From)
	}
	return err
}

// CheckDiscovery judges proxy.discovery.converges in a mixed window: what
// the apiservers at newer serve locally and the others do not is found by
// comparing their discovery, and every apiserver's peer-merged discovery
// must show all of it within its budget (certify/discovery-converges). It returns those resources and how
// long the merged views took to show them.
func CheckDiscovery(ctx context.Context, c *cluster.Cluster, newer version.Version) (promise.Verdict, []discovery.Resource, time.Duration) {
	const id = "proxy.discovery.converges"
	start := time.Now()
	all, err := servers(ctx, c)
	if err != nil {
		return fail(id, "%v", err), nil, 0
	}
	only, mixed, err := newerOnly(ctx, all, newer)
	if err != nil {
		return fail(id, "%v", err), nil, 0
	}
	if !mixed {
		versions := map[string]string{}
		for _, s := range all {
			versions[s.Name] = s.Version.String()
		}
		return fail(id, "not a mixed window: control planes %v", versions), nil, 0
	}
	clients := map[string]*kubernetes.Clientset{}
	for _, s := range all {
		if clients[s.Name], err = s.client(); err != nil {
			return fail(id, "%v", err), nil, 0
		}
	}
	var lacking []string
	err = wait.For(ctx, "certify/discovery-converges", "every apiserver's merged discovery to show what only "+newer.String()+" serves",
		func(ctx context.Context) (bool, string, error) {
			lacking = nil
			for _, s := range all {
				merged, err := discovery.Merged(ctx, clients[s.Name])
				lacking = append(lacking, lacks(s.Name, merged, err, only)...)
			}
			return len(lacking) == 0, strings.Join(lacking, "; "), nil
		})
	took := time.Since(start)
	return convergedVerdict(newer, only, took, err), only, took
}

// lacks is what server's merged discovery (or the error getting it)
// lacks of only, what the newer version alone serves.
func lacks(server string, merged discovery.Set, err error, only []discovery.Resource) []string {
	if err != nil {
		return []string{server + ": " + err.Error()}
	}
	var out []string
	for _, r := range only {
		if _, ok := merged[r.Key()]; !ok {
			out = append(out, server+" lacks "+r.Key())
		}
	}
	return out
}

// convergedVerdict judges proxy.discovery.converges on the wait for every
// merged view to show only (err: it did not, within its budget), which
// took took.
func convergedVerdict(newer version.Version, only []discovery.Resource, took time.Duration, err error) promise.Verdict {
	const id = "proxy.discovery.converges"
	if err != nil {
		return fail(id, "%v", err)
	}
	if len(only) == 0 { // the pair's input rules it out, as noWindow says
		return promise.Inapplicable(id, "%s serves no resource the older apiservers lack: no merged view has anything to converge on", newer)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{fmt.Sprintf("%d resource(s) only %s serves, in every merged view after %s", len(only), newer, took.Round(100*time.Millisecond))}}
}

// CheckAllOld judges proxy.rollback.all-old once every control plane is
// back at the older version: the object from before is intact, the
// resource only the newer version served answers a true 404 on every
// apiserver, which serves it itself (no other apiserver logs it), and,
// within the discovery budget, no apiserver's merged discovery still
// advertises anything none of them serves (a client would keep using
// what went away).
func CheckAllOld(ctx context.Context, c *cluster.Cluster, r discovery.Resource, before *corev1.ConfigMap) promise.Verdict {
	const id = "proxy.rollback.all-old"
	if err := Intact(ctx, c, before); err != nil {
		return fail(id, "%v", err)
	}
	all, err := servers(ctx, c)
	if err != nil {
		return fail(id, "%v", err)
	}
	for _, s := range all {
		cs, ids, err := s.traced()
		if err != nil {
			return fail(id, "%v", err)
		}
		got := cs.Discovery().RESTClient().Get().AbsPath(r.Path()).Do(ctx).Error()
		if v := goneAfterRollback(r, s, got); v != nil {
			return *v
		}
		if err := notForwarded(ctx, c, s, all, ids.all()); err != nil {
			return fail(id, "after the rollback: %v", err)
		}
	}
	start := time.Now()
	if err := advertisedOnlyServed(ctx, all); err != nil {
		return fail(id, "after the rollback: %v", err)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("the object from before intact; %s: 404 on %v, each logged by the server asked alone", r.Key(), names(all)),
		fmt.Sprintf("every merged discovery advertises only what some apiserver serves (%s after the check began)", time.Since(start).Round(100*time.Millisecond))}}
}

// advertisedOnlyServed waits until no merged discovery of all advertises
// a resource that none of all serves locally.
func advertisedOnlyServed(ctx context.Context, all []Server) error {
	served := discovery.Set{}
	for _, s := range all {
		local, err := s.local(ctx)
		if err != nil {
			return err
		}
		maps.Copy(served, local)
	}
	return waitDiscovery(ctx, all, discovery.Merged, "every merged discovery to advertise only what some apiserver serves", func(merged discovery.Set) []string {
		return advertisedBeyond(merged, served)
	})
}

// advertisedBeyond is what merged advertises and served lacks, each said
// as "still advertises KEY".
func advertisedBeyond(merged, served discovery.Set) []string {
	var out []string
	for _, r := range discovery.OnlyIn(merged, served) {
		out = append(out, "still advertises "+r.Key())
	}
	return out
}

// goneAfterRollback judges proxy.rollback.all-old on how s, once every
// control plane is back at the older version, answered for r, the
// resource only the newer version served: nil when with a true 404.
func goneAfterRollback(r discovery.Resource, s Server, got error) *promise.Verdict {
	if apierrors.IsNotFound(got) {
		return nil
	}
	v := fail("proxy.rollback.all-old", "%s on %s (%s) after the rollback: %v, want 404 (no server serves it now)", r.Path(), s.Name, s.Version, got)
	return &v
}
