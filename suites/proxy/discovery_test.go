package proxy

import (
	"context"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
)

// peerDiscovery compares each apiserver's peer-merged /apis with the local
// views (profile=nopeer) of all of them.
func peerDiscovery(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
	g := NewWithT(t)
	local := map[string]map[string]bool{}
	union := map[string]bool{}
	for _, sv := range win.all() {
		res, err := discoveryResources(ctx, sv, true)
		g.Expect(err).NotTo(HaveOccurred())
		local[sv.Name] = res
		for r := range res {
			union[r] = true
		}
	}
	key := win.cert.Resource.Key()
	for _, sv := range win.all() {
		merged, err := discoveryResources(ctx, sv, false)
		g.Expect(err).NotTo(HaveOccurred())
		var missing, viaPeers []string
		for r := range union {
			if !merged[r] {
				missing = append(missing, r)
			}
		}
		for r := range merged {
			if !local[sv.Name][r] {
				viaPeers = append(viaPeers, r)
			}
		}
		sort.Strings(viaPeers)
		g.Expect(missing).To(BeEmpty(), "%s's /apis lacks what its peers serve", sv.Name)
		g.Expect(merged).To(HaveKey(key), "%s's /apis", sv.Name)
		if sv.Version == win.From {
			g.Expect(local[sv.Name]).NotTo(HaveKey(key), "%s's nopeer view shows only what it serves", sv.Name)
			g.Expect(viaPeers).To(ContainElement(key))
		}
		s.Measured(t, "discovery on %s (%s): %d resources merged, %d local; only through peers: %v", sv.Name, sv.Version, len(merged), len(local[sv.Name]), viaPeers)
	}
	return ctx
}
