package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/jstemmer/go-junit-report/v2/junit"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// JUnit writes one test suite per run and one test case per promise: a
// failure fails its case, a skip skips it, and a waiver passes with the
// waiver's reason and reference in the case's output, so a CI's test view
// shows every promise by its ID.
func (r *Results) JUnit(w io.Writer) error {
	suites := junit.Testsuites{Name: fmt.Sprintf("skewer certify %s -> %s", r.From, r.To)}
	for i, run := range r.Runs {
		s := junit.Testsuite{
			Name: fmt.Sprintf("%s -> %s (%s)", r.From, r.To, run.Label()),
			ID:   i,
			Time: seconds(r.Finished.Sub(r.Started).Seconds()),
		}
		s.SetTimestamp(r.Started)
		s.AddProperty("cluster", run.Cluster)
		s.AddProperty("strategy", run.Strategy)
		if run.Shard != "" {
			s.AddProperty("shard", run.Shard)
		}
		s.AddProperty("outcome", string(r.Outcome))
		s.AddProperty("coverage", r.Coverage.String())
		s.AddProperty("strict", fmt.Sprint(r.Strict))
		for _, p := range run.Promises {
			tc := junit.Testcase{Name: string(p.ID), Classname: "skewer." + p.ID.Area() + "." + run.Strategy}
			detail := p.Statement
			if len(p.Evidence) > 0 {
				detail += "\nevidence:\n  " + strings.Join(p.Evidence, "\n  ")
			}
			if len(p.Measured) > 0 {
				detail += "\nmeasured:\n  " + strings.Join(p.Measured, "\n  ")
			}
			switch p.Outcome {
			case promise.Fail:
				tc.Failure = &junit.Result{Message: p.Reason, Type: "promise", Data: detail}
			case promise.Error:
				tc.Error = &junit.Result{Message: p.Reason, Type: "could not be judged", Data: detail}
			case promise.NotApplicable, promise.NotSelected:
				tc.Skipped = &junit.Result{Message: string(p.Outcome) + ": " + p.Reason}
			case promise.Waived:
				detail = "waived: " + p.Reason + " (" + p.Reference + "; waiver " + p.Waiver + ")\n" + detail
			}
			tc.SystemOut = &junit.Output{Data: detail}
			s.AddTestcase(tc)
		}
		suites.AddSuite(s)
	}
	return suites.WriteXML(w)
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }
