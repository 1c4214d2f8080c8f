package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// BenchmarkSurgeRollout rolls the ha profile's control planes from the
// first version to the second with skewer's surge and prints the whole
// rollout's duration and the time per replaced node; then, on the same
// cluster in the same run, replaces one more node the bare way a person
// would with kubeadm alone (start the node, copy the certificates, kubeadm
// join; kubeadm reset and delete the old one: no wait for Ready, no load
// balancer update, no drain) and prints the ratio of the two.
func BenchmarkSurgeRollout(b *testing.B) {
	ctx := context.Background()
	c, resolver := pairCluster(b, "bench-rollout")
	defer c.Delete(ctx, false)
	to := versions[1]
	if _, err := resolver.Resolve(ctx, to); err != nil {
		b.Fatal(err)
	}

	var perNode, skewerJoin time.Duration
	b.Run("skewer-surge", func(b *testing.B) {
		actions, err := rollout.Surge(ctx, c, rollout.SurgeInput{To: to})
		if err != nil {
			b.Fatal(err)
		}
		r := &rollout.Runner{Out: discard{}}
		start := time.Now()
		if err := r.Run(ctx, c, actions); err != nil {
			b.Fatal(err)
		}
		total := time.Since(start)
		nodes := 0
		var replacing time.Duration
		for _, s := range r.Steps {
			switch {
			case strings.HasPrefix(s.Name, "start a "):
				nodes++
			case strings.HasPrefix(s.Name, "join the new node"):
				skewerJoin += s.Duration
			}
			if !strings.HasPrefix(s.Name, "set ClusterConfiguration") {
				replacing += s.Duration
			}
		}
		perNode = replacing / time.Duration(nodes)
		skewerJoin /= time.Duration(nodes)
		// Where a node's time goes: each step's mean over the nodes.
		steps, order := map[string]time.Duration{}, []string{}
		for _, s := range r.Steps {
			name := stepKind(s.Name)
			if _, seen := steps[name]; !seen {
				order = append(order, name)
			}
			steps[name] += s.Duration
		}
		for _, name := range order {
			fmt.Printf("    %-58s %8.2f s/node\n", name, (steps[name] / time.Duration(nodes)).Seconds())
		}
		report(b, total.Seconds(), "s-rollout")
		report(b, perNode.Seconds(), "s/node")
		report(b, skewerJoin.Seconds(), "s/join")
	})

	var bare, bareJoin time.Duration
	b.Run("bare-kubeadm", func(b *testing.B) {
		if perNode == 0 {
			b.Skip("the surge did not finish")
		}
		cps, err := c.ControlPlanes(ctx)
		if err != nil {
			b.Fatal(err)
		}
		old := cps[len(cps)-1]
		start := time.Now()
		n, err := rollout.StartControlPlane(ctx, c, to)
		if err != nil {
			b.Fatal(err)
		}
		joinStart := time.Now()
		if err := rollout.JoinControlPlane(ctx, c, cps[0], n); err != nil {
			b.Fatal(err)
		}
		bareJoin = time.Since(joinStart)
		if _, err := old.Run(ctx, "kubeadm", "reset", "--force"); err != nil {
			b.Fatal(err)
		}
		if _, err := cps[0].Run(ctx, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "delete", "node", old.Name); err != nil {
			b.Fatal(err)
		}
		if err := docker.Remove(ctx, old.Name); err != nil {
			b.Fatal(err)
		}
		bare = time.Since(start)
		report(b, bare.Seconds(), "s/node")
		report(b, bareJoin.Seconds(), "s/join")
	})
	if bare > 0 {
		b.Run("ratio", func(b *testing.B) {
			report(b, perNode.Seconds()/bare.Seconds(), "skewer/bare-per-node")
			report(b, skewerJoin.Seconds()/bareJoin.Seconds(), "skewer/bare-join")
		})
		setAnchor(anchorReplace, bare)
		record(figure{what: "a control plane replaced by surge (the rollout alone)", took: perNode, anchor: anchorReplace, maxRatio: maxAnchorRatio})
		record(figure{what: "  its kubeadm join", took: skewerJoin, anchor: "bare kubeadm join", anchorTook: bareJoin, maxRatio: maxAnchorRatio})
	}
}

// pairCluster creates the ha profile at the first of VERSIONS, for a
// rollout to the second, and the resolver of both versions' images; it
// skips without Docker or a second version.
func pairCluster(b *testing.B, name string) (*cluster.Cluster, *nodeimage.Resolver) {
	needDocker(b)
	if len(versions) < 2 {
		b.Skip("needs two versions in VERSIONS")
	}
	ctx := context.Background()
	spec, err := cluster.LoadProfile("../clusters/ha.yaml")
	if err != nil {
		b.Fatal(err)
	}
	spec.Name = name
	spec.Version = versions[0]
	resolver := &nodeimage.Resolver{Source: nodeimage.SourceBuild, Out: discard{}}
	c, err := cluster.Create(ctx, spec, resolver.Resolve, cluster.Options{StateDir: b.TempDir(), Out: discard{}})
	if err != nil {
		if c != nil {
			c.Delete(ctx, false)
		}
		b.Fatal(err)
	}
	return c, resolver
}

// stepKind is a step's name without the node it names, so that the same
// step of every replaced node adds up.
func stepKind(name string) string {
	for _, prefix := range []string{"start a ", "drain ", "remove ", "set ClusterConfiguration"} {
		if strings.HasPrefix(name, prefix) {
			return strings.TrimSpace(prefix) + " ..."
		}
	}
	return name
}
