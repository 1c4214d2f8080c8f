// Package certify is the certification's vocabulary: the catalogue of
// promises with stable IDs, the verdict each gets in a run, the waivers of
// documented upstream behaviour, and the version pairs a run may certify.
package promise

import (
	"fmt"

	"github.com/skewer-k8s/skewer/harness/version"
)

// Pair is the two versions a certification moves between: From, the
// version the cluster starts at, and To, the next minor.
type Pair struct{ From, To version.Version }

func (p Pair) String() string { return p.From.String() + " -> " + p.To.String() }

// ParsePair parses and checks a pair against the skew policy a rolling
// control-plane upgrade follows: one minor forward, same major. It says
// what is wrong in one line, before anything is built or created.
func ParsePair(from, to string) (Pair, error) {
	f, err := version.Parse(from)
	if err != nil {
		return Pair{}, fmt.Errorf("--from: %w", err)
	}
	t, err := version.Parse(to)
	if err != nil {
		return Pair{}, fmt.Errorf("--to: %w", err)
	}
	p := Pair{From: f, To: t}
	return p, p.Validate()
}

// Validate checks the pair is adjacent and goes forward.
func (p Pair) Validate() error {
	switch {
	case p.From.IsZero() || p.To.IsZero():
		return fmt.Errorf("a pair needs both versions (from %q, to %q)", p.From, p.To)
	case p.To.Less(p.From):
		return fmt.Errorf("%s goes backwards: certify the upgrade %s -> %s (a rollback is part of it)", p, p.To, p.From)
	case p.From.Major() != p.To.Major() || p.To.Minor() != p.From.Minor()+1:
		return fmt.Errorf("%s is not an adjacent pair: control planes move one minor at a time (e.g. v%d.%d.x -> v%d.%d.x)",
			p, p.From.Major(), p.From.Minor(), p.From.Major(), p.From.Minor()+1)
	}
	return nil
}
