package certify

import (
	"errors"
	"fmt"
)

// Outcome is what a run concluded of one promise. There is no other kind:
// "reported, not failed" is either a failure or a waiver.
type Outcome string

const (
	// Pass: the promise held, with its evidence.
	Pass Outcome = "pass"
	// Fail: it did not; the reason says what was expected and what was seen.
	Fail Outcome = "fail"
	// Waived: it did not, in a way upstream documents; the waiver's
	// reference says where.
	Waived Outcome = "waived"
	// Skipped: not checked in this run, and why.
	Skipped Outcome = "skipped"
)

// Verdict is one promise's outcome in one run.
type Verdict struct {
	ID      ID      `json:"id"`
	Outcome Outcome `json:"outcome"`
	// Reason says why it failed (expected, observed), why it was skipped,
	// or, waived, the waiver's reason and what was observed.
	Reason string `json:"reason,omitempty"`
	// Reference is a waiver's upstream reference.
	Reference string `json:"reference,omitempty"`
	// Evidence points at what the verdict rests on: audit IDs, metric
	// deltas, object names, files under the run's evidence directory.
	Evidence []string `json:"evidence,omitempty"`
	// Causes name, for a failure, why each thing that went wrong did, as
	// far as the check could tell (e.g. authorizer-not-synced); "unknown"
	// for one it could not explain. A waiver for a cause covers a failure
	// only when every cause is that one.
	Causes []string `json:"causes,omitempty"`
}

// Validate refuses a verdict a report could not stand on: an ID outside
// the catalogue, an unknown outcome, a failure or a skip without a reason,
// a waiver without its reference.
func (v Verdict) Validate() error {
	if _, ok := Lookup(v.ID); !ok {
		return fmt.Errorf("verdict for %q: no such promise in the catalogue", v.ID)
	}
	switch v.Outcome {
	case Pass:
	case Fail, Skipped:
		if v.Reason == "" {
			return fmt.Errorf("verdict %s %s: says nothing of why", v.ID, v.Outcome)
		}
	case Waived:
		if v.Reason == "" || v.Reference == "" {
			return fmt.Errorf("verdict %s waived: needs the waiver's reason and reference", v.ID)
		}
	default:
		return fmt.Errorf("verdict %s: unknown outcome %q (want pass, fail, waived or skipped)", v.ID, v.Outcome)
	}
	return nil
}

// Failed says whether any verdict fails the run: a failure, or any
// verdict that is not valid.
func Failed(vs []Verdict) error {
	var errs []error
	for _, v := range vs {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		} else if v.Outcome == Fail {
			errs = append(errs, fmt.Errorf("%s failed: %s", v.ID, v.Reason))
		}
	}
	return errors.Join(errs...)
}
