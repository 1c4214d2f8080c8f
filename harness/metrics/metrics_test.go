package metrics

import (
	"strings"
	"testing"
)

// An excerpt of a v1.36 apiserver's /metrics, as it writes it.
const sample = `# HELP apiserver_rerouted_request_total [ALPHA] Total number of requests that were proxied to a peer kube apiserver because the local apiserver was not capable of serving it
# TYPE apiserver_rerouted_request_total counter
apiserver_rerouted_request_total{code="200",group="admissionregistration.k8s.io",resource="mutatingadmissionpolicies",version="v1"} 7
apiserver_rerouted_request_total{code="201",group="admissionregistration.k8s.io",resource="mutatingadmissionpolicies",version="v1"} 2
apiserver_rerouted_request_total{code="503",group="apps",resource="deployments",version="v1"} 1
# HELP apiserver_request_duration_seconds [STABLE] Response latency distribution in seconds.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="GET",le="0.1"} 3
apiserver_request_duration_seconds_bucket{verb="GET",le="+Inf"} 4
apiserver_request_duration_seconds_sum{verb="GET"} 0.5
apiserver_request_duration_seconds_count{verb="GET"} 4
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.7648e+09
`

func TestSumAndDelta(t *testing.T) {
	after, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"apiserver_rerouted_request_total", nil, 10},
		{"apiserver_rerouted_request_total", map[string]string{"resource": "mutatingadmissionpolicies"}, 9},
		{"apiserver_rerouted_request_total", map[string]string{"resource": "mutatingadmissionpolicies", "code": "201"}, 2},
		{"apiserver_rerouted_request_total", map[string]string{"code": "404"}, 0},
		{"apiserver_peer_proxy_errors_total", nil, 0}, // absent: not yet incremented
		{"apiserver_request_duration_seconds", map[string]string{"verb": "GET"}, 4},
	}
	for _, c := range cases {
		if got := after.Sum(c.name, c.match); got != c.want {
			t.Errorf("Sum(%s, %v) = %g, want %g", c.name, c.match, got, c.want)
		}
	}
	before, _ := Parse(strings.NewReader(strings.Replace(sample, "} 7\n", "} 3\n", 1)))
	if d, err := Delta(before, after, "apiserver_rerouted_request_total", map[string]string{"code": "200"}); d != 4 || err != nil {
		t.Errorf("Delta = %g, %v; want 4", d, err)
	}
	if d, err := Delta(before, after, "apiserver_rerouted_request_total", map[string]string{"code": "404"}); d != 0 || err != nil {
		t.Errorf("Delta of series not there = %g, %v; want 0: the family is exported", d, err)
	}
	// An absent family proves nothing: an error, not a zero.
	if _, err := Delta(before, after, "apiserver_peer_proxy_errors_total", nil); err == nil || !strings.Contains(err.Error(), "not exported") {
		t.Errorf("Delta of an absent family: %v, want an error", err)
	}
	// A restart between the scrapes starts every counter again.
	restarted, _ := Parse(strings.NewReader(strings.Replace(sample, "1.7648e+09", "1.7649e+09", 1)))
	if _, err := Delta(after, restarted, "apiserver_rerouted_request_total", nil); err == nil || !strings.Contains(err.Error(), "restarted between the two scrapes") {
		t.Errorf("Delta across a restart: %v, want an error", err)
	}
	series := after.Series("apiserver_rerouted_request_total")
	if len(series) != 3 || !strings.Contains(series[0], `code="200"`) || !strings.HasSuffix(series[0], " 7") {
		t.Errorf("Series = %q", series)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("this is { not metrics\n")); err == nil {
		t.Fatal("want an error for text that is not the exposition format")
	}
}

// What WriteText keeps parses back to the same figures; what it leaves
// out is gone.
func TestWriteTextRoundTrips(t *testing.T) {
	s, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteText(&b, func(name string) bool { return name != "apiserver_request_duration_seconds" }); err != nil {
		t.Fatal(err)
	}
	back, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, b.String())
	}
	if len(back) != 2 || back.Sum("apiserver_rerouted_request_total", nil) != 10 || back.Sum("process_start_time_seconds", nil) != 1.7648e+09 {
		t.Errorf("written back:\n%s", b.String())
	}
	if _, kept := back["apiserver_request_duration_seconds"]; kept {
		t.Error("a family left out was written")
	}
}
