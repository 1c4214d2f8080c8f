package rollout

import (
	"strings"
	"testing"
)

func TestSetBackendsKeepsHealthChecks(t *testing.T) {
	cds := `resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: kube_apiservers
  connect_timeout: 0.25s
  health_checks:
  - interval: 2s
    http_health_check:
      path: /healthz
  load_assignment:
    cluster_name: kube_apiservers
    endpoints:
    - lb_endpoints:
      - endpoint:
          address:
            socket_address:
              address: c-control-plane
              port_value: 6443
`
	out, err := setBackends([]byte(cds), []string{"c-control-plane4", "c-control-plane2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"c-control-plane2", "c-control-plane4", "path: /healthz", "interval: 2s"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rewritten CDS lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "address: c-control-plane\n") {
		t.Errorf("removed backend still there:\n%s", out)
	}
}
