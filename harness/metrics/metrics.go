// Package metrics scrapes an apiserver's /metrics and reads counters from
// it with Prometheus' own text parser, so a suite can assert by how much a
// counter moved between two scrapes.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Snapshot is one scrape: metric families by name.
type Snapshot map[string]*dto.MetricFamily

// Scrape reads /metrics through cs (which must be allowed to).
func Scrape(ctx context.Context, cs kubernetes.Interface) (Snapshot, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to scrape /metrics: %w", err)
	}
	return Parse(strings.NewReader(string(raw)))
}

// Parse reads the Prometheus text format.
func Parse(r io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("failed to parse metrics: %w", err)
	}
	return Snapshot(fams), nil
}

// Sum adds the values of name's series whose labels include every pair of
// match (counters, gauges and untyped; a histogram or summary counts its
// observations). A family that is absent sums to 0: a counter not yet
// incremented is not exported.
func (s Snapshot) Sum(name string, match map[string]string) float64 {
	fam, ok := s[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if matches(m, match) {
			sum += value(m)
		}
	}
	return sum
}

// value is one series' value; a histogram or summary counts its observations.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount())
	}
	return 0
}

// Series lists name's series as `{k="v",...} value` lines, sorted: evidence
// for a report.
func (s Snapshot) Series(name string) []string {
	fam, ok := s[name]
	if !ok {
		return nil
	}
	var out []string
	for _, m := range fam.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		out = append(out, fmt.Sprintf("{%s} %g", strings.Join(labels, ","), value(m)))
	}
	sort.Strings(out)
	return out
}

// ErrNotExported says a family is absent from a scrape.
var ErrNotExported = errors.New("not exported")

// startTime is the family every Go process exports: when it started.
const startTime = "process_start_time_seconds"

// Delta is how much name's matching series moved from before to after,
// two scrapes of one apiserver. It refuses a figure it cannot stand on:
// when the apiserver restarted between the scrapes (its start time
// changed, so its counters began again from nothing), and when after
// lacks the family altogether - a counter not yet incremented is not
// exported, so its absence cannot tell "did not move" from "a name this
// version does not have", and a zero read from it would prove nothing.
func Delta(before, after Snapshot, name string, match map[string]string) (float64, error) {
	if b, a := before.Sum(startTime, nil), after.Sum(startTime, nil); b != a {
		return 0, fmt.Errorf("%s: the apiserver restarted between the two scrapes (%s %.0f, then %.0f): its counters began again", name, startTime, b, a)
	}
	if _, ok := after[name]; !ok {
		return 0, fmt.Errorf("%s is %w by this apiserver: never incremented since it started, or not a name its version has", name, ErrNotExported)
	}
	return after.Sum(name, match) - before.Sum(name, match), nil
}

func matches(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// WriteText writes the families keep selects in Prometheus' text format,
// sorted by name: a scrape kept as evidence, readable by promtool and by
// Parse.
func (s Snapshot) WriteText(w io.Writer, keep func(name string) bool) error {
	names := make([]string, 0, len(s))
	for n := range s {
		if keep(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if _, err := expfmt.MetricFamilyToText(w, s[n]); err != nil {
			return err
		}
	}
	return nil
}
