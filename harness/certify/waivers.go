package certify

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Waiver accepts a promise's failure because upstream documents the
// behaviour: the cluster does what its code and design say, and the
// promise asks more. Each one names where upstream says so.
type Waiver struct {
	ID ID `json:"id"`
	// Observed is what the cluster does instead of what the promise says.
	Observed string `json:"observed"`
	// Reason is why that is upstream's behaviour, not a fault of the build.
	Reason string `json:"reason"`
	// Reference is an https address upstream: a KEP, an issue, a line of code.
	Reference string `json:"reference"`
	// Cause, when set, narrows the waiver to failures whose every cause
	// (Verdict.Causes) is this one: a failure the check could not explain,
	// or explained otherwise, stays a failure.
	Cause string `json:"cause,omitempty"`
}

// UpstreamFile is the repository's own waivers file, relative to the
// checkout: the suites and skewer certify both load it.
var UpstreamFile = filepath.Join("clusters", "waivers", "upstream.yaml")

// Waivers are the waivers in force, by promise.
type Waivers map[ID]Waiver

// LoadWaivers reads waiver files (the repository's, then a user's) in
// the form `waivers: [{id, observed, reason, reference}]`. Unknown fields,
// promises outside the catalogue, a waiver without a reason or an https
// reference, and one promise waived twice are errors that name the file.
func LoadWaivers(paths ...string) (Waivers, error) {
	out := Waivers{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("failed to read waivers: %w", err)
		}
		var doc struct {
			Waivers []Waiver `json:"waivers"`
		}
		if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
			return nil, fmt.Errorf("malformed waivers file %s: %w", p, err)
		}
		for i, w := range doc.Waivers {
			if err := w.validate(); err != nil {
				return nil, fmt.Errorf("waivers file %s, waiver %d: %w", p, i+1, err)
			}
			if _, dup := out[w.ID]; dup {
				return nil, fmt.Errorf("waivers file %s: %s is waived twice", p, w.ID)
			}
			out[w.ID] = w
		}
	}
	return out, nil
}

func (w Waiver) validate() error {
	if _, ok := Lookup(w.ID); !ok {
		return fmt.Errorf("%q is not a promise in the catalogue", w.ID)
	}
	if w.Observed == "" || w.Reason == "" {
		return fmt.Errorf("%s: a waiver says what is observed and why upstream does it", w.ID)
	}
	u, err := url.Parse(w.Reference)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return errors.New(string(w.ID) + ": a waiver's reference is an https address upstream")
	}
	return nil
}

// Apply turns a failure into a waiver when one is in force for its
// promise. With strict every waiver is refused: the failure stays, and
// says which waiver it would have had.
func (ws Waivers) Apply(v Verdict, strict bool) Verdict {
	w, ok := ws[v.ID]
	if v.Outcome != Fail || !ok {
		return v
	}
	if other := w.uncovered(v.Causes); other != "" {
		v.Reason = fmt.Sprintf("%s (the waiver covers only the cause %s, not %s)", v.Reason, w.Cause, other)
		return v
	}
	if strict {
		v.Reason = fmt.Sprintf("%s (waiver refused by --strict: %s)", v.Reason, w.Reference)
		return v
	}
	v.Outcome = Waived
	v.Reason = fmt.Sprintf("%s; observed: %s", w.Reason, v.Reason)
	v.Reference = w.Reference
	return v
}

// uncovered is a cause of a failure that w does not cover, if any.
func (w Waiver) uncovered(causes []string) string {
	if w.Cause == "" {
		return ""
	}
	if len(causes) == 0 {
		return UnknownCause
	}
	for _, c := range causes {
		if c != w.Cause {
			return c
		}
	}
	return ""
}

// UnknownCause is the cause of a failure a check could not explain.
const UnknownCause = "unknown"
