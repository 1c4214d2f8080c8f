package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// BenchmarkInPlaceRollout upgrades the ha profile's first two control
// planes in place with skewer - kubeadm upgrade apply on the first, upgrade
// node on the second, each inside skewer's steps (out of the load balancer,
// the apiserver stopped while kubeadm replaces its etcd member, the kubelet
// replaced and restarted, Ready and serving at the version awaited, back
// into the load balancer) - and then, on the same cluster in the same run,
// the third the bare way a person would: kubeadm and the kubelet copied in,
// kubeadm upgrade node, the kubelet restarted, nothing awaited after. It
// prints skewer's time for the second node (an upgrade node, as the bare
// one) against the bare one's.
func BenchmarkInPlaceRollout(b *testing.B) {
	ctx := context.Background()
	c, resolver := pairCluster(b, "bench-inplace")
	defer c.Delete(ctx, false)
	to := versions[1]
	art, err := resolver.Artifacts(ctx, to)
	if err != nil {
		b.Fatal(err)
	}
	cps, err := c.ControlPlanes(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(cps) < 3 {
		b.Fatalf("%d control planes: the ha profile has 3", len(cps))
	}

	var skewerNode time.Duration
	var left *cluster.Node // the control plane skewer did not upgrade
	b.Run("skewer-upgrade-node", func(b *testing.B) {
		r := &rollout.Runner{Out: discard{}}
		if err := rollout.Roll(ctx, c, rollout.RollInput{To: to, Strategy: rollout.StrategyInPlace, PauseAfter: 2, Images: resolver, Runner: r}); err != nil {
			b.Fatal(err)
		}
		touched, second := map[string]bool{}, ""
		for _, s := range r.Steps {
			touched[s.Node] = true
			if strings.HasPrefix(s.Name, "kubeadm upgrade node") {
				second = s.Node
			}
		}
		for _, s := range r.Steps {
			if s.Node == second {
				skewerNode += s.Duration
			}
		}
		for i := range cps {
			if !touched[cps[i].Name] {
				left = &cps[i]
			}
		}
		report(b, skewerNode.Seconds(), "s/node")
	})

	b.Run("bare-kubeadm-upgrade-node", func(b *testing.B) {
		if skewerNode == 0 || left == nil {
			b.Skip("skewer's in-place upgrade of two control planes did not finish")
		}
		n := *left
		start := time.Now()
		for _, bin := range []string{"kubeadm", "kubelet"} {
			body, err := os.ReadFile(filepath.Join(art.BinDir, bin))
			if err != nil {
				b.Fatal(err)
			}
			if err := n.WriteFile(ctx, "/usr/bin/"+bin, body, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		// kubeadm's preflight refuses a cgroup v1 host outright; kind skips it too.
		if out, err := n.Run(ctx, "kubeadm", "upgrade", "node", "--ignore-preflight-errors=all"); err != nil {
			b.Fatalf("kubeadm upgrade node: %v: %s", err, out)
		}
		if _, err := n.Run(ctx, "systemctl", "restart", "kubelet"); err != nil {
			b.Fatal(err)
		}
		bare := time.Since(start)
		report(b, bare.Seconds(), "s/node")
		record(figure{what: "a control plane upgraded in place (kubeadm upgrade node)", took: skewerNode,
			anchor: "bare kubeadm upgrade node", anchorTook: bare, maxRatio: maxAnchorRatio})
	})
}
