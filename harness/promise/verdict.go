package promise

import (
	"errors"
	"fmt"
)

// Outcome is what a run concluded of one promise. There is no other kind:
// "reported, not failed" is either a failure or a waiver, and a check
// that could not look is an error, never a skip.
type Outcome string

const (
	// Pass: the promise held, on evidence above the check's floor.
	Pass Outcome = "pass"
	// Fail: it did not; the reason says what was expected and what was seen.
	Fail Outcome = "fail"
	// Waived: it did not, for a cause a detector found in the evidence of
	// that very failure and a waiver in force names (versions, upstream
	// reference).
	Waived Outcome = "waived"
	// Error: the check could not run - its phase or its setup failed, or
	// the run ended before it. It counts as a failure and names what failed.
	Error Outcome = "error"
	// NotApplicable: the input rules the promise out (the strategy, the
	// pair, a feature the versions lack); the reason states the rule.
	NotApplicable Outcome = "not-applicable"
	// NotSelected: --only or --skip left it out. Not run, not counted.
	NotSelected Outcome = "not-selected"

	// Incomplete is a certification's outcome (never a verdict's) when
	// the run was cut short: it is never a pass, whatever was judged.
	Incomplete Outcome = "incomplete"
)

// Outcomes are a verdict's outcomes in the order a reader needs them:
// what failed first.
var Outcomes = []Outcome{Fail, Error, Waived, NotApplicable, NotSelected, Pass}

// Judged says whether the outcome is a judgement of the promise on
// evidence: pass, fail or waived.
func (o Outcome) Judged() bool { return o == Pass || o == Fail || o == Waived }

// Fails says whether the outcome fails a run: a failure, or a check that
// could not run.
func (o Outcome) Fails() bool { return o == Fail || o == Error }

// Verdict is one promise's outcome in one run.
type Verdict struct {
	ID      ID      `json:"id"`
	Outcome Outcome `json:"outcome"`
	// Reason says why it failed (expected, observed), why it could not be
	// judged or does not apply, or, waived, the waiver's reason and what
	// was observed.
	Reason string `json:"reason,omitempty"`
	// Reference is a waiver's upstream reference.
	Reference string `json:"reference,omitempty"`
	// Waiver, when waived (or refused by --strict), is where the waiver
	// is written (file:line) and the versions it holds for.
	Waiver string `json:"waiver,omitempty"`
	// Evidence points at what the verdict rests on: audit IDs, metric
	// deltas, object names, files under the run's evidence directory, and
	// what a cause's detector matched.
	Evidence []string `json:"evidence,omitempty"`
	// Causes name, for a failure, why each thing that went wrong did, as
	// a detector found it in the evidence (e.g. authorizer-not-synced);
	// "unknown" for one no detector explained. A waiver for a cause
	// covers a failure only when every cause is that one.
	Causes []string `json:"causes,omitempty"`
}

// Errored is a verdict for a promise whose check could not run.
func Errored(id ID, format string, args ...any) Verdict {
	return Verdict{ID: id, Outcome: Error, Reason: fmt.Sprintf(format, args...)}
}

// Inapplicable is a verdict for a promise the input rules out, with the rule.
func Inapplicable(id ID, format string, args ...any) Verdict {
	return Verdict{ID: id, Outcome: NotApplicable, Reason: fmt.Sprintf(format, args...)}
}

// NothingObserved is the failure of a check that counts and saw less
// than its floor: a pass needs evidence, and none is not evidence.
func NothingObserved(id ID, floor int, what string, saw int) Verdict {
	return Verdict{ID: id, Outcome: Fail, Reason: fmt.Sprintf("nothing observed: %d %s, fewer than the %d this promise needs to be judged", saw, what, floor)}
}

// Validate refuses a verdict a report could not stand on: an ID outside
// the catalogue, an unknown outcome, anything but a pass without a
// reason, a waiver without its reference.
func (v Verdict) Validate() error {
	if _, ok := Lookup(v.ID); !ok {
		return fmt.Errorf("verdict for %q: no such promise in the catalogue", v.ID)
	}
	switch v.Outcome {
	case Pass:
	case Fail, Error, NotApplicable, NotSelected:
		if v.Reason == "" {
			return fmt.Errorf("verdict %s %s: says nothing of why", v.ID, v.Outcome)
		}
	case Waived:
		if v.Reason == "" || v.Reference == "" || len(v.Causes) == 0 {
			return fmt.Errorf("verdict %s waived: needs the waiver's reason, reference and the cause found", v.ID)
		}
	default:
		return fmt.Errorf("verdict %s: unknown outcome %q (want one of %v)", v.ID, v.Outcome, Outcomes)
	}
	return nil
}

// Failed says whether any verdict fails the run: a failure, an error, or
// any verdict that is not valid.
func Failed(vs []Verdict) error {
	var errs []error
	for _, v := range vs {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		} else if v.Outcome.Fails() {
			errs = append(errs, fmt.Errorf("%s %s: %s", v.ID, map[Outcome]string{Fail: "failed", Error: "could not be judged"}[v.Outcome], v.Reason))
		}
	}
	return errors.Join(errs...)
}
