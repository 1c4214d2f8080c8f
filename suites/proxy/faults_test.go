package proxy

import (
	"context"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/skewer-k8s/skewer/harness/certification"
)

// runtimeConfigVariant turns node.k8s.io/v1 off on a newer apiserver:
// the same routing then happens between servers of one version's code
// (certification.CheckRuntimeConfig).
func runtimeConfigVariant(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	for _, v := range certification.CheckRuntimeConfig(ctx, s.Cluster, win.cert) {
		s.Judge(t, v)
	}
	return ctx
}

// peerLink black-holes, then slows, the link from the first old
// apiserver to its only capable peer (certification.CheckPeerLink).
func peerLink(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	for _, v := range certification.CheckPeerLink(ctx, s.Cluster, win.cert) {
		s.Judge(t, v)
	}
	return ctx
}

// onlyPeerStopped stops the one apiserver that serves the new resource
// (certification.CheckOnlyPeerGone).
func onlyPeerStopped(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	s.Judge(t, certification.CheckOnlyPeerGone(ctx, s.Cluster, win.cert))
	return ctx
}

// otherPeerServes stops one of two capable peers
// (certification.CheckPeerStopped).
func otherPeerServes(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	s.Judge(t, certification.CheckPeerStopped(ctx, s.Cluster, win.cert))
	return ctx
}

// peerKilled kills the window's first capable peer and judges what the
// first old apiserver answers (certification.CheckPeerKilled).
func peerKilled(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	for _, v := range certification.CheckPeerKilled(ctx, s.Cluster, win.cert) {
		s.Judge(t, v)
	}
	return ctx
}
