package certification

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/metrics"
)

// evidenceFamilies are the metric families kept of each scrape (by name
// or prefix): what the checks read, and what tells an apiserver's state at
// a phase's edge. The rest (histograms above all) would make a scrape
// megabytes.
var evidenceFamilies = []string{"apiserver_peer_", "apiserver_rerouted_request_total", "kubernetes_feature_enabled",
	"kubernetes_build_info", "process_start_time_seconds", "apiserver_request_total", "apiserver_current_inflight_requests",
	"apiserver_longrunning_requests", "apiserver_storage_objects", "apiserver_audit_", "aggregator_discovery_",
	"etcd_request_errors_total", "apiserver_tls_handshake_errors_total", "apiserver_flowcontrol_rejected_requests_total"}

func keptFamily(name string) bool {
	for _, f := range evidenceFamilies {
		if name == f || (strings.HasSuffix(f, "_") && strings.HasPrefix(name, f)) {
			return true
		}
	}
	return false
}

var notInName = regexp.MustCompile(`[^a-z0-9.]+`)

// scrapeMetrics keeps every control plane's /metrics at an edge of the
// current phase ("before" the first, then "after" each: phases follow one
// another with nothing between), in
// <evidence>/<strategy>/metrics/<NN>-<edge>-<phase>/<node>.prom. One that
// cannot be read leaves <node>.err with why: an apiserver down mid-rollout
// is evidence too. Nothing is kept without --out, or outside the stretch
// from the cluster's creation to the export of the evidence.
func (r *run) scrapeMetrics(ctx context.Context, edge string) {
	if r.in.Evidence == "" || !r.scraping {
		return
	}
	name := fmt.Sprintf("%02d-%s-%s", r.scrapes, edge, strings.Trim(notInName.ReplaceAllString(strings.ToLower(r.current), "-"), "-"))
	r.scrapes++
	if len(name) > 80 {
		name = name[:80]
	}
	dir := filepath.Join(r.in.Evidence, string(r.strategy), "metrics", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(r.out, "metrics evidence: %v\n", err)
		return
	}
	nodes, err := r.c.ControlPlanes(ctx)
	if err != nil {
		_ = os.WriteFile(filepath.Join(dir, "control-planes.err"), []byte(err.Error()+"\n"), 0o644)
		return
	}
	for _, n := range nodes {
		if err := r.keepScrape(ctx, n, filepath.Join(dir, n.Name+".prom")); err != nil {
			_ = os.WriteFile(filepath.Join(dir, n.Name+".err"), []byte(err.Error()+"\n"), 0o644)
		}
	}
}

func (r *run) keepScrape(ctx context.Context, n cluster.Node, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cs, err := r.c.APIServerClient(ctx, n)
	if err != nil {
		return err
	}
	snap, err := metrics.Scrape(ctx, cs)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := snap.WriteText(f, keptFamily); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
