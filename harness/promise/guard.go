package promise

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// GuardThresholds are the bounds a guarded rollout's signals keep after every
// step. The defaults (DefaultGuard) are argued in docs/guard.md; a file
// (docs/guard-thresholds.yaml holds them) and --guard name=value change
// them. harness/guard reads the signals.
type GuardThresholds struct {
	// Max5xxShare is the share (0 to 1) of requests, through every target
	// no step acted on, that may be answered with a 5xx.
	Max5xxShare float64 `json:"max5xxShare"`
	// MaxForwardedFailures is the share (0 to 1) of forwarded requests -
	// the newer-only resource asked of an apiserver that lacks it - that
	// may be answered with a 5xx or not at all.
	MaxForwardedFailures float64 `json:"maxForwardedFailures"`
	// MaxFalse404 is how many 404s a server that advertised the resource
	// may answer for it.
	MaxFalse404 int `json:"maxFalse404"`
	// MaxForwardedAddedP99 bounds the p99 latency of forwarded requests
	// over the p99 of the same request served where the resource lives.
	MaxForwardedAddedP99 Duration `json:"maxForwardedAddedP99"`
	// MaxDiscoveryConvergence bounds how long after a step every
	// apiserver's peer-merged discovery may take to show what the
	// apiservers serve then, and nothing more.
	MaxDiscoveryConvergence Duration `json:"maxDiscoveryConvergence"`
	// Confidence is how sure a share's breach must be: the failures seen
	// would come by chance with probability below 1-Confidence if the
	// share were at its threshold.
	Confidence float64 `json:"confidence"`
	// MinSample is the fewest requests a share is decided on without a
	// breach; a step that saw fewer is judged with the next.
	MinSample int `json:"minSample"`
}

// Duration is a time.Duration written as "1s" in a file.
type Duration struct{ time.Duration }

func (d Duration) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(d.String())), nil }

func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("a duration is written in quotes, like \"1s\": %s", b)
	}
	d.Duration, err = time.ParseDuration(s)
	return err
}

// DefaultGuard are the repository's thresholds, argued in docs/guard.md:
// KEP-4020's objective (99% of proxied requests without a 5xx) for both
// shares, no false 404 while the proxy is on (the design's own bound),
// a forwarded request at most 1 s slower at p99 than a local one (the
// upstream API call latency SLO for a single object, which a forwarded
// request must still meet), merged discovery right within 30 s of a step
// (twice the 15 s a peer's endpoint record lives), breaches decided at
// 99% confidence, and no share decided on fewer than 10 requests.
var DefaultGuard = GuardThresholds{
	Max5xxShare: 0.01, MaxForwardedFailures: 0.01, MaxFalse404: 0,
	MaxForwardedAddedP99: Duration{time.Second}, MaxDiscoveryConvergence: Duration{30 * time.Second},
	Confidence: 0.99, MinSample: 10,
}

// Validate refuses thresholds no rollout could be held to, each reason
// in one line.
func (t GuardThresholds) Validate() error {
	var errs []error
	share := func(name string, v float64) {
		if !(v >= 0 && v <= 1) { // NaN too
			errs = append(errs, fmt.Errorf("guard threshold %s is %g: want a share from 0 to 1", name, v))
		}
	}
	share("max5xxShare", t.Max5xxShare)
	share("maxForwardedFailures", t.MaxForwardedFailures)
	if !(t.Confidence > 0 && t.Confidence < 1) {
		errs = append(errs, fmt.Errorf("guard threshold confidence is %g: want more than 0 and less than 1", t.Confidence))
	}
	if t.MaxFalse404 < 0 {
		errs = append(errs, fmt.Errorf("guard threshold maxFalse404 is %d: cannot be negative", t.MaxFalse404))
	}
	if t.MaxForwardedAddedP99.Duration < 0 {
		errs = append(errs, fmt.Errorf("guard threshold maxForwardedAddedP99 is %s: cannot be negative", t.MaxForwardedAddedP99))
	}
	if t.MaxDiscoveryConvergence.Duration <= 0 {
		errs = append(errs, fmt.Errorf("guard threshold maxDiscoveryConvergence is %s: want more than 0", t.MaxDiscoveryConvergence))
	}
	if t.MinSample < 1 {
		errs = append(errs, fmt.Errorf("guard threshold minSample is %d: want at least 1", t.MinSample))
	}
	return errors.Join(errs...)
}

// GuardNames are the thresholds' names, as a file and --guard write them.
func GuardNames() []string {
	return []string{"max5xxShare", "maxForwardedFailures", "maxFalse404", "maxForwardedAddedP99", "maxDiscoveryConvergence", "confidence", "minSample"}
}

// Load reads thresholds from a YAML or JSON file over t: what the file
// does not name keeps t's value; a name the file gives that is not a
// threshold is refused.
func (t GuardThresholds) Load(path string) (GuardThresholds, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return t, fmt.Errorf("guard thresholds: %w", err)
	}
	if err := yaml.UnmarshalStrict(raw, &t); err != nil {
		return t, fmt.Errorf("guard thresholds %s: %w (the names are %s)", path, err, strings.Join(GuardNames(), ", "))
	}
	return t, t.Validate()
}

// Set changes one threshold from name=value, as --guard gives it.
func (t GuardThresholds) Set(assignment string) (GuardThresholds, error) {
	name, value, ok := strings.Cut(assignment, "=")
	if !ok || !slices.Contains(GuardNames(), name) {
		return t, fmt.Errorf("--guard %q: want name=value, the name one of %s", assignment, strings.Join(GuardNames(), ", "))
	}
	var err error
	switch name {
	case "max5xxShare":
		t.Max5xxShare, err = strconv.ParseFloat(value, 64)
	case "maxForwardedFailures":
		t.MaxForwardedFailures, err = strconv.ParseFloat(value, 64)
	case "confidence":
		t.Confidence, err = strconv.ParseFloat(value, 64)
	case "maxFalse404":
		t.MaxFalse404, err = strconv.Atoi(value)
	case "minSample":
		t.MinSample, err = strconv.Atoi(value)
	case "maxForwardedAddedP99":
		t.MaxForwardedAddedP99.Duration, err = time.ParseDuration(value)
	case "maxDiscoveryConvergence":
		t.MaxDiscoveryConvergence.Duration, err = time.ParseDuration(value)
	}
	if err != nil {
		return t, fmt.Errorf("--guard %s: %w", assignment, err)
	}
	return t, t.Validate()
}
