// Package version is a Kubernetes release version, parsed once where it
// enters the program (a flag, a profile, an apiserver's /version) and
// carried as a value from there. It is a leaf: anything may import it.
package version

import (
	"fmt"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// Version is a Kubernetes release version such as v1.36.3. A distribution's
// build keeps its pre-release and build suffixes (v1.36.3-acme.2,
// v1.36.3+k3s1) and is still minor 36. The zero Version is "no version".
// Versions compare with == by their exact text; Equal says whether two are
// the same release.
type Version struct{ text string }

// Parse accepts vMAJOR.MINOR.PATCH, with or without the leading v, and
// optional pre-release and build suffixes.
func Parse(s string) (Version, error) {
	in := strings.TrimSpace(s)
	if !strings.HasPrefix(in, "v") {
		in = "v" + in
	}
	v, err := utilversion.ParseSemantic(in)
	if err != nil {
		return Version{}, fmt.Errorf("invalid Kubernetes version %q: want vMAJOR.MINOR.PATCH, e.g. v1.36.3", s)
	}
	return Version{"v" + v.String()}, nil
}

// MustParse is Parse for versions written in code; it panics on a typo.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// ParseList parses every element of in, or says which one is wrong.
func ParseList(in []string) ([]Version, error) {
	out := make([]Version, 0, len(in))
	for _, s := range in {
		v, err := Parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// IsZero says the Version was never set.
func (v Version) IsZero() bool { return v.text == "" }

// semver is v for comparison; v came from Parse, so it parses.
func (v Version) semver() *utilversion.Version { return utilversion.MustParseSemantic(v.text) }

// String is the version as Kubernetes writes it, with the leading v
// (v1.36.3, v1.36.3-acme.2); "" for the zero Version.
func (v Version) String() string { return v.text }

// Major is the major number.
func (v Version) Major() uint { return v.component(0) }

// Minor is the minor number: what the skew policy counts.
func (v Version) Minor() uint { return v.component(1) }

// Patch is the patch number.
func (v Version) Patch() uint { return v.component(2) }

func (v Version) component(i int) uint {
	if v.IsZero() {
		return 0
	}
	return v.semver().Components()[i]
}

// PreRelease is the pre-release suffix ("acme.2" of v1.36.3-acme.2), ""
// for a release. kubeadm calls a version with one unstable.
func (v Version) PreRelease() string {
	if v.IsZero() {
		return ""
	}
	return v.semver().PreRelease()
}

// Compare is -1, 0 or 1 as v is older than, the same as, or newer than o,
// by semantic-version precedence (a pre-release is older than its
// release; build metadata does not count).
func (v Version) Compare(o Version) int {
	switch {
	case v.IsZero() && o.IsZero():
		return 0
	case v.IsZero():
		return -1
	case o.IsZero():
		return 1
	}
	a, b := v.semver(), o.semver()
	switch {
	case a.LessThan(b):
		return -1
	case b.LessThan(a):
		return 1
	}
	return 0
}

// Less says v is older than o.
func (v Version) Less(o Version) bool { return v.Compare(o) < 0 }

// Equal says v and o are the same release (build metadata aside).
func (v Version) Equal(o Version) bool { return v.Compare(o) == 0 }

// AtLeast says v is o or newer.
func (v Version) AtLeast(o Version) bool { return v.Compare(o) >= 0 }

// MinorsApart is how many minors lie between v and o, whichever is newer;
// a different major counts as too far apart for any skew policy.
func (v Version) MinorsApart(o Version) int {
	if v.Major() != o.Major() {
		return 1 << 20
	}
	d := int(v.Minor()) - int(o.Minor())
	if d < 0 {
		d = -d
	}
	return d
}

// MarshalText writes the version as String does, so profiles and records
// hold "v1.36.3".
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText parses as Parse does; empty text is the zero Version.
func (v *Version) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*v = Version{}
		return nil
	}
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// Set parses a flag's value (flag.Value and pflag.Value).
func (v *Version) Set(s string) error { return v.UnmarshalText([]byte(s)) }

// Type names the flag's type in help output (pflag.Value).
func (v *Version) Type() string { return "version" }
