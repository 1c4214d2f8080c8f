package certification

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/certify"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
)

// proxyGate is the Mixed Version Proxy's feature gate: alpha and off in
// 1.35, beta and on by default from 1.36.
const proxyGate = "UnknownVersionInteroperabilityProxy"

// CheckBetaDefault judges mvp.defaults.beta in the window (issue 14 item
// 8). Every apiserver must run with the proxy's gate unset - on its
// default - and the first older one must report the gate on
// (kubernetes_feature_enabled) and serve the window's resource by
// forwarding. Then that server is restarted without --peer-ca-file, the
// gate still on by default: it must answer the false 404, since the proxy
// is built only with a peer CA - which kubeadm does not set, so a cluster
// upgraded with stock kubeadm gets no proxy (the verdict says so). The
// flag is put back before it returns. Where some apiserver has the gate
// set explicitly (a cluster with a server below 1.36 sets it everywhere),
// no server runs on the default and the promise is skipped.
func CheckBetaDefault(ctx context.Context, c *cluster.Cluster, w *Window) certify.Verdict {
	const id = "mvp.defaults.beta"
	var explicit []string
	for _, s := range slices.Concat(w.Old, w.New) {
		node, err := c.Node(ctx, s.Name)
		if err != nil {
			return fail(id, "%v", err)
		}
		flags, err := apiserverFlags(ctx, node)
		if err != nil {
			return fail(id, "%v", err)
		}
		for _, f := range flags {
			if strings.HasPrefix(f, "--feature-gates=") && strings.Contains(f, proxyGate) {
				explicit = append(explicit, fmt.Sprintf("%s (%s): %s", s.Name, s.Version, f))
			}
		}
	}
	if len(explicit) > 0 {
		return certify.Verdict{ID: id, Outcome: certify.Skipped, Reason: fmt.Sprintf(
			"no apiserver runs on the gate's default: it is set on %s (a cluster with a server below v1.36, where the gate is alpha, has it set on every server)",
			strings.Join(explicit, "; "))}
	}
	old := w.Old[0]
	enabled := func() (float64, error) { return featureEnabled(ctx, old, proxyGate) }
	if on, err := enabled(); err != nil || on != 1 {
		return fail(id, "%s (%s) with the gate unset: kubernetes_feature_enabled{name=%q} = %g (%v), want 1", old.Name, old.Version, proxyGate, on, err)
	}
	if _, err := w.RouteWorks(ctx, "default"); err != nil {
		return fail(id, "on the gate's default, %v", err)
	}
	node, err := c.Node(ctx, old.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	noCA := &faults.APIServerFlags{Node: node, Remove: []string{"peer-ca-file"}}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		_ = noCA.Revert(rctx, c)
	}()
	if err := noCA.Inject(ctx, c); err != nil {
		return fail(id, "%v", err)
	}
	api, err := w.api(old, "default")
	if err != nil {
		return fail(id, "%v", err)
	}
	_, lerr := api.List(ctx, metav1.ListOptions{Limit: 1})
	on, err := enabled()
	if err != nil {
		return fail(id, "without --peer-ca-file: %v", err)
	}
	if !apierrors.IsNotFound(lerr) || on != 1 {
		return fail(id, "%s restarted without --peer-ca-file, the gate on by default (kubernetes_feature_enabled %g): list %s answered %v, want the false 404 of a server with no proxy",
			old.Name, on, w.Resource.Key(), orOK(lerr))
	}
	if err := noCA.Revert(ctx, c); err != nil {
		return fail(id, "%v", err)
	}
	took, err := w.RouteWorks(ctx, "default")
	if err != nil {
		return fail(id, "with --peer-ca-file back: %v", err)
	}
	return certify.Verdict{ID: id, Outcome: certify.Pass, Evidence: []string{
		fmt.Sprintf("the gate unset on every apiserver; %s (%s) reports it on (kubernetes_feature_enabled 1) and serves %s by forwarding", old.Name, old.Version, w.Resource.Key()),
		fmt.Sprintf("restarted without --peer-ca-file, the gate still on: %s answers the false 404 for %s; with it back it forwards again %s after its restart",
			old.Name, w.Resource.Key(), took.Round(100*time.Millisecond)),
		"--peer-ca-file alone decides whether the proxy is built, and kubeadm does not set it: a cluster upgraded with stock kubeadm has no proxy; " +
			"give every apiserver --peer-ca-file (e.g. /etc/kubernetes/pki/ca.crt) through kubeadm's apiServer.extraArgs",
	}}
}
