package promise

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	yamlv3 "gopkg.in/yaml.v3"
	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/version"
)

// Waiver accepts a promise's failure because upstream documents the
// behaviour: the cluster does what its code and design say, and the
// promise asks more. It covers only failures whose every cause - found by
// the check's detector in the evidence of that very failure - is its
// Cause, and only on the versions it names.
type Waiver struct {
	ID ID `json:"id"`
	// Cause is the one cause it covers (Verdict.Causes): a failure the
	// check could not explain, or explained otherwise, stays a failure.
	Cause string `json:"cause"`
	// Versions are the minors (1.35, 1.36) the behaviour is known for:
	// the waiver holds only when every version in play is one of them,
	// and lapses outside them until someone reads upstream again.
	Versions []string `json:"versions"`
	// Observed is what the cluster does instead of what the promise says.
	Observed string `json:"observed"`
	// Reason is why that is upstream's behaviour, not a fault of the build.
	Reason string `json:"reason"`
	// Reference is an https address upstream saying the behaviour is
	// intended or unfixed in those versions: a KEP, an open issue, a line
	// of code.
	Reference string `json:"reference"`

	// Source is where the waiver is written: file:line.
	Source string `json:"-"`
	// Renamed, when the file names the promise by an old ID, says so
	// (Canonical): the reader shows it, so the file gets fixed.
	Renamed string `json:"-"`
	// lapsed, once the waivers are scoped (For), says why it does not
	// hold for the versions in play; "" when it does.
	lapsed string
	scoped bool
}

// UpstreamFile is the repository's own waivers file, relative to the
// checkout: the suites and skewer certify both load it.
var UpstreamFile = filepath.Join("clusters", "waivers", "upstream.yaml")

// Waivers are the waivers read, by promise.
type Waivers map[ID]Waiver

var minorRE = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// LoadWaivers reads waiver files (the repository's, then a user's) in
// the form `waivers: [{id, cause, versions, observed, reason, reference}]`.
// Unknown fields, promises outside the catalogue, a waiver without a
// cause, versions, reason or https reference, and one promise waived
// twice are errors that name the file and line.
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
		lines := itemLines(raw)
		for i, w := range doc.Waivers {
			w.Source = p
			if i < len(lines) {
				w.Source = fmt.Sprintf("%s:%d", p, lines[i])
			}
			if w.ID, w.Renamed = Canonical(w.ID); w.Renamed != "" {
				w.Renamed = w.Source + ": " + w.Renamed
			}
			if err := w.validate(); err != nil {
				return nil, fmt.Errorf("waivers file %s, waiver %d: %w", w.Source, i+1, err)
			}
			if _, dup := out[w.ID]; dup {
				return nil, fmt.Errorf("waivers file %s: %s is waived twice", w.Source, w.ID)
			}
			out[w.ID] = w
		}
	}
	return out, nil
}

// itemLines is the line of each entry of the file's waivers list.
func itemLines(raw []byte) []int {
	var root yamlv3.Node
	if yamlv3.Unmarshal(raw, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "waivers" {
			var out []int
			for _, item := range m.Content[i+1].Content {
				out = append(out, item.Line)
			}
			return out
		}
	}
	return nil
}

func (w Waiver) validate() error {
	if _, ok := Lookup(w.ID); !ok {
		return fmt.Errorf("%q is not a promise in the catalogue", w.ID)
	}
	if w.Observed == "" || w.Reason == "" {
		return fmt.Errorf("%s: a waiver says what is observed and why upstream does it", w.ID)
	}
	if w.Cause == "" || w.Cause == UnknownCause {
		return fmt.Errorf("%s: a waiver names the cause it covers, one a check's detector finds in the evidence (a waiver without one would cover any failure, a check's own error included)", w.ID)
	}
	if len(w.Versions) == 0 {
		return fmt.Errorf("%s: a waiver names the minors it holds for (versions: [\"1.35\", \"1.36\"])", w.ID)
	}
	for _, m := range w.Versions {
		if !minorRE.MatchString(m) {
			return fmt.Errorf("%s: version %q: want a minor such as 1.36", w.ID, m)
		}
	}
	u, err := url.Parse(w.Reference)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return errors.New(string(w.ID) + ": a waiver's reference is an https address upstream")
	}
	return nil
}

// For scopes the waivers to the versions in play (a certification's pair,
// a suite's cluster): a waiver that does not name every one of their
// minors lapses, and a failure it would have covered stays a failure that
// says so. Waivers not scoped waive nothing.
func (ws Waivers) For(versions ...version.Version) Waivers {
	out := Waivers{}
	for id, w := range ws {
		w.scoped, w.lapsed = true, ""
		var outside []string
		for _, v := range versions {
			m := fmt.Sprintf("%d.%d", v.Major(), v.Minor())
			if !slices.Contains(w.Versions, m) && !slices.Contains(outside, m) {
				outside = append(outside, m)
			}
		}
		if len(versions) == 0 {
			outside = append(outside, "no version given")
		}
		if len(outside) > 0 {
			w.lapsed = fmt.Sprintf("the waiver at %s holds for %s, not %s", w.Source, strings.Join(w.Versions, ", "), strings.Join(outside, ", "))
		}
		out[id] = w
	}
	return out
}

// Apply turns a failure into a waiver when one in force covers every
// cause of it. With strict every waiver is refused: the failure stays,
// and says which waiver it would have had.
func (ws Waivers) Apply(v Verdict, strict bool) Verdict {
	w, ok := ws[v.ID]
	if v.Outcome != Fail || !ok {
		return v
	}
	if other := w.uncovered(v.Causes); other != "" {
		v.Reason = fmt.Sprintf("%s (the waiver covers only the cause %s, not %s)", v.Reason, w.Cause, other)
		return v
	}
	switch {
	case !w.scoped:
		v.Reason = fmt.Sprintf("%s (the waiver at %s was not scoped to the versions in play, so it holds for none)", v.Reason, w.Source)
		return v
	case w.lapsed != "":
		v.Reason = fmt.Sprintf("%s (%s: it lapsed)", v.Reason, w.lapsed)
		return v
	}
	v.Waiver = fmt.Sprintf("%s (cause %s, versions %s)", w.Source, w.Cause, strings.Join(w.Versions, ", "))
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
