package certification

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/version"
)

// proxyGate is the Mixed Version Proxy's feature gate: alpha and off in
// 1.35, beta and on by default from 1.36.
const proxyGate = "UnknownVersionInteroperabilityProxy"

// gateBeta says whether the gate is Beta, on by default, in version v.
func gateBeta(v version.Version) bool { return v.Major() > 1 || v.Minor() >= 36 }

// CheckBetaDefault judges proxy.defaults.beta through the window's entry,
// w.Old[0] (issue 14 item 8): a server of 1.36 or later whose gate is
// unset - on its Beta default - must report the gate on
// (kubernetes_feature_enabled) and serve the window's resource by
// forwarding. Then it is restarted without --peer-ca-file, the gate still
// on by default: it must answer the false 404, since the proxy is built
// only with a peer CA - which kubeadm does not set, so a cluster upgraded
// with stock kubeadm gets no proxy (the verdict says so). The flag is not
// put back: the caller's own revert restores the entry's manifest as it
// was before either change, in one restart (the variant's, whose revert
// follows at once; a second restart to put back the flag alone, then a
// third for the variant's, cost ~25 s). An entry below 1.36 (the gate alpha: it must be
// set) or with the gate set explicitly does not run on the default: the
// promise does not apply, saying so. The runtime-config variant calls it with
// its window, whose entry is always of the newer version: a pair from
// 1.35 judges it on a 1.36 server there (the rollout leaves the gate
// unset on the servers it deploys at 1.36 and later).
func CheckBetaDefault(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.defaults.beta"
	old := w.Old[0]
	if !gateBeta(old.Version) {
		return promise.Verdict{ID: id, Outcome: promise.NotApplicable, Reason: fmt.Sprintf(
			"the entry %s runs %s, where the gate is alpha and must be set: no default to prove", old.Name, old.Version)}
	}
	node, err := c.Node(ctx, old.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	flags, err := apiserverFlags(ctx, node)
	if err != nil {
		return fail(id, "%v", err)
	}
	for _, f := range flags {
		if strings.HasPrefix(f, "--feature-gates=") && strings.Contains(f, proxyGate) {
			return promise.Verdict{ID: id, Outcome: promise.NotApplicable, Reason: fmt.Sprintf(
				"%s (%s) does not run on the gate's default: it is set (%s)", old.Name, old.Version, f)}
		}
	}
	enabled := func() (float64, error) { return featureEnabled(ctx, old, proxyGate) }
	if on, err := enabled(); err != nil || on != 1 {
		return fail(id, "%s (%s) with the gate unset: kubernetes_feature_enabled{name=%q} = %g (%v), want 1", old.Name, old.Version, proxyGate, on, err)
	}
	if _, err := w.RouteWorks(ctx, "default"); err != nil {
		return fail(id, "on the gate's default, %v", err)
	}
	// Live: without the proxy a server with a built-in API turned off
	// (the runtime-config variant's entry) may never be ready - its own
	// admission's informer of that API cannot list it - yet it serves.
	noCA := &faults.APIServerFlags{Node: node, Remove: []string{"peer-ca-file"}, Live: true}
	if err := noCA.Inject(ctx, c); err != nil {
		return fail(id, "%v", err)
	}
	api, err := w.api(old, "default")
	if err != nil {
		return fail(id, "%v", err)
	}
	_, lerr := api.List(ctx, metav1.ListOptions{Limit: 1})
	readiness := unready(ctx, old)
	on, err := enabled()
	if err != nil {
		return fail(id, "without --peer-ca-file: %v", err)
	}
	if v := betaWithoutCA(old.Name, w.Resource.Key(), on, lerr); v != nil {
		return *v
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("the gate unset on %s (%s), which reports it on (kubernetes_feature_enabled 1) and serves %s by forwarding", old.Name, old.Version, w.Resource.Key()),
		fmt.Sprintf("restarted without --peer-ca-file, the gate still on: %s answers the false 404 for %s (its /readyz then: %s)",
			old.Name, w.Resource.Key(), readiness),
		"--peer-ca-file alone decides whether the proxy is built, and kubeadm does not set it: a cluster upgraded with stock kubeadm has no proxy; " +
			"give every apiserver --peer-ca-file (e.g. /etc/kubernetes/pki/ca.crt) through kubeadm's apiServer.extraArgs",
	}}
}

// betaWithoutCA judges proxy.defaults.beta on entry restarted without
// --peer-ca-file, the gate on by default: it reports the gate (on) and
// must answer the list of key (lerr) with the false 404 of a server with
// no proxy. Nil when it did.
func betaWithoutCA(entry, key string, on float64, lerr error) *promise.Verdict {
	if apierrors.IsNotFound(lerr) && on == 1 {
		return nil
	}
	v := fail("proxy.defaults.beta", "%s restarted without --peer-ca-file, the gate on by default (kubernetes_feature_enabled %g): list %s answered %v, want the false 404 of a server with no proxy",
		entry, on, key, orOK(lerr))
	return &v
}

// unready says what s's /readyz reports: "ok", or the checks that fail.
func unready(ctx context.Context, s Server) string {
	cs, err := s.client()
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").DoRaw(ctx)
	if err == nil {
		return "ok"
	}
	var failing []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "[-]") {
			failing = append(failing, strings.TrimPrefix(l, "[-]"))
		}
	}
	if len(failing) == 0 {
		return "not ready: " + err.Error()
	}
	return "not ready: " + strings.Join(failing, "; ")
}
