package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/suite"
	"github.com/skewer-k8s/skewer/harness/version"
)

// server is one control plane's apiserver, addressed directly.
type server struct {
	cluster.Node
	Version version.Version
	IP      string
	cfg     *rest.Config
}

// window is the cluster held in the mixed window: apiservers at the older
// version and at the newer.
type window struct {
	From, To version.Version
	Old, New []server
	// cert is the same window as certify's checks take it, its resource
	// the one discovery found only the newer apiservers serve.
	cert *certification.Window
}

func (w *window) all() []server { return append(append([]server{}, w.Old...), w.New...) }

// holdWindow brings the cluster to exactly newCount control planes at
// --proxy.to (surging forward or back one node at a time as needed), waits
// until every apiserver's discovery shows what only the newer version
// serves (certification.CheckDiscovery, which measures how long that
// took), and returns the window over the first resource of it to route.
func holdWindow(ctx context.Context, t *testing.T, newCount int) *window {
	t.Helper()
	g := NewWithT(t)
	from := fromVersion(t)
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	g.Expect(err).NotTo(HaveOccurred())
	have := 0
	for _, v := range versions {
		if v == flagTo {
			have++
		}
	}
	if have != newCount {
		r := &rollout.Runner{Out: suite.LogWriter(t)}
		if load != nil {
			r = load.Runner(t, nil)
		}
		if have > newCount {
			// A step back within the window, not a rollback: the record of
			// where the rollout started stays.
			actions, err := rollout.Surge(ctx, s.Cluster, rollout.SurgeInput{To: from, PauseAfter: have - newCount, AllowDowngrade: true})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Run(ctx, s.Cluster, actions)).To(Succeed())
		} else {
			g.Expect(rollout.Roll(ctx, s.Cluster, rollout.RollInput{
				To: flagTo, Strategy: rollout.StrategySurge, PauseAfter: newCount - have, Runner: r})).To(Succeed())
		}
	}
	w := &window{From: from, To: flagTo}
	for _, sv := range servers(ctx, t) {
		if sv.Version == flagTo {
			w.New = append(w.New, sv)
		} else {
			w.Old = append(w.Old, sv)
		}
	}
	g.Expect(w.New).To(HaveLen(newCount))
	s.Measured(t, "mixed window: %d at %s %v, %d at %s %v", len(w.Old), from, names(w.Old), len(w.New), flagTo, names(w.New))
	// Waits until every apiserver's merged discovery shows what only the
	// newer version serves, the suite's resource among it.
	v, newer, took := certification.CheckDiscovery(ctx, s.Cluster, flagTo)
	s.Judge(t, v)
	g.Expect(v.Outcome).To(Equal(promise.Pass), "every apiserver's discovery shows what only %s serves", flagTo)
	s.Measured(t, "discovery: %d resource(s) only %s serves %v; every apiserver's merged discovery showed them %s after the window was held",
		len(newer), flagTo, newer, took.Round(100*time.Millisecond))
	w.cert, err = certification.OpenWindow(ctx, s.Cluster, flagTo, newer)
	g.Expect(err).NotTo(HaveOccurred())
	return w
}

// servers are the cluster's apiservers, each addressed directly.
func servers(ctx context.Context, t *testing.T) []server {
	out, err := apiservers(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return out
}

func apiservers(ctx context.Context) ([]server, error) {
	cps, err := s.Cluster.ControlPlanes(ctx)
	if err != nil {
		return nil, err
	}
	versions, err := rollout.NodeVersions(ctx, s.Cluster)
	if err != nil {
		return nil, err
	}
	var out []server
	for _, n := range cps {
		cfg, err := s.Cluster.APIServerConfig(ctx, n)
		if err != nil {
			return nil, err
		}
		ip, err := n.IP()
		if err != nil {
			return nil, err
		}
		out = append(out, server{Node: n, Version: versions[n.Name], IP: ip, cfg: cfg})
	}
	return out, nil
}

// fromVersion is the version the cluster was created at: the profile's,
// or -skewer.version.
func fromVersion(t *testing.T) version.Version {
	if s.Spec == nil || s.Spec.Version.IsZero() {
		t.Fatalf("cluster %s has no spec skewer made: its older version is unknown", s.Cluster.Name)
	}
	return s.Spec.Version
}

// discoveryResources reads sv's aggregated /apis (local only with nopeer)
// as a set of "group/version/resource".
func discoveryResources(ctx context.Context, sv server, nopeer bool) (map[string]bool, error) {
	read := discovery.Merged
	if nopeer {
		read = discovery.Local
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	set, err := read(ctx, sv.client())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sv.Name, err)
	}
	out := map[string]bool{}
	for key := range set {
		out[key] = true
	}
	return out, nil
}

func names(servers []server) []string {
	var out []string
	for _, sv := range servers {
		out = append(out, sv.Name)
	}
	return out
}

// client is an admin client of sv alone.
func (sv server) client() *kubernetes.Clientset {
	return kubernetes.NewForConfigOrDie(sv.cfg)
}
