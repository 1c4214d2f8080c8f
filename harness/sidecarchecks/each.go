package sidecarchecks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// onEach judges id by check on every kubelet, one after the other: a pass
// carries each one's evidence; the first failure fails it, named with its
// kubelet. A cluster whose kubelets all run one version fails it too: a
// side of the skew would go unchecked.
func (s *Sidecars) onEach(ctx context.Context, id promise.ID, check func(context.Context, Kubelet) ([]string, error)) promise.Verdict {
	var results []kubeletResult
	for _, k := range s.Kubelets {
		lines, err := check(ctx, k)
		results = append(results, kubeletResult{lines, err})
		if err != nil && !errors.Is(err, errInapplicable) {
			break
		}
	}
	return s.judgeEach(id, results)
}

// onEachAtOnce is onEach with every kubelet's check run at the same time,
// for a check that waits on each node in turn and shares nothing between
// them but the API (its Pods are each in a namespace of their own).
func (s *Sidecars) onEachAtOnce(ctx context.Context, id promise.ID, check func(context.Context, Kubelet) ([]string, error)) promise.Verdict {
	results := make([]kubeletResult, len(s.Kubelets))
	var wg sync.WaitGroup
	for i, k := range s.Kubelets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines, err := check(ctx, k)
			results[i] = kubeletResult{lines, err}
		}()
	}
	wg.Wait()
	return s.judgeEach(id, results)
}

// kubeletResult is one kubelet's evidence or error.
type kubeletResult struct {
	lines []string
	err   error
}

// errUnjudged marks what a check could not see enough of to judge (a
// floor not met): on its own it makes the verdict an error, never a pass
// or a fail.
var errUnjudged = errors.New("not judged")

// unjudged is an error that says what the check could not see.
func unjudged(format string, args ...any) error {
	return fmt.Errorf("%s (%w)", fmt.Sprintf(format, args...), errUnjudged)
}

// errInapplicable marks what the cluster under test does not offer for a
// check to judge (an enforcing NetworkPolicy engine), found in its own
// evidence: on every kubelet it makes the verdict not-applicable, on some
// but not all a failure (the cluster treats its nodes unalike).
var errInapplicable = errors.New("not applicable")

// inapplicable is an error that says what the cluster does not offer,
// and the evidence that shows it.
func inapplicable(format string, args ...any) error {
	return fmt.Errorf("%s (%w)", fmt.Sprintf(format, args...), errInapplicable)
}

// judgeEach is the verdict on the kubelets' results, in the kubelets'
// order (onEach's stop at the first failure): every failure is named. A
// kubelet whose check could not judge (unjudged) makes it an error,
// unless another failed; inapplicable on every kubelet is
// not-applicable, on some a failure.
func (s *Sidecars) judgeEach(id promise.ID, results []kubeletResult) promise.Verdict {
	var ev, reasons []string
	outcome, unjudgedSeen, inapplicableSeen := promise.Error, false, 0
	for i, r := range results {
		k := s.Kubelets[i]
		if r.err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", k, r.err))
			switch {
			case errors.Is(r.err, errUnjudged):
				unjudgedSeen = true
			case errors.Is(r.err, errInapplicable):
				inapplicableSeen++
			default:
				outcome = promise.Fail
			}
			continue
		}
		for _, l := range r.lines {
			ev = append(ev, k.String()+": "+l)
		}
	}
	switch {
	case outcome != promise.Fail && !unjudgedSeen && inapplicableSeen == len(s.Kubelets):
		outcome = promise.NotApplicable
	case outcome != promise.Fail && !unjudgedSeen && inapplicableSeen > 0:
		outcome = promise.Fail
		reasons = append(reasons, fmt.Sprintf("it applies on the cluster's other %d kubelet(s): the nodes are treated unalike", len(s.Kubelets)-inapplicableSeen))
	}
	if len(reasons) > 0 {
		return promise.Verdict{ID: id, Outcome: outcome, Evidence: ev, Reason: strings.Join(reasons, "; ")}
	}
	if len(s.Kubelets) < 2 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev,
			Reason: fmt.Sprintf("the cluster's kubelets all run %v: one side of the skew is not checked", s.Kubelets)}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}
