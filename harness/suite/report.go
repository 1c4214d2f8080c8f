package suite

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// Record is one line of a suite's report: a figure measured, or a
// promise's verdict.
type Record struct {
	Test string `json:"test"`
	Text string `json:"text,omitempty"`
	// Verdict is set when the record judges a promise.
	Verdict *promise.Verdict `json:"verdict,omitempty"`
}

// Measured logs a figure in t and keeps it for the suite's report,
// written to report.md in the evidence directory (and to the GitHub
// Actions step summary when there is one) when the suite ends, pass or fail.
func (s *Suite) Measured(t *testing.T, format string, args ...any) {
	t.Helper()
	text := fmt.Sprintf(format, args...)
	t.Logf("MEASURED: %s", text)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, Record{Test: t.Name(), Text: text})
}

// Judge records a promise's verdict. A failure that upstream documents is
// waived by the repository's waivers (clusters/waivers/upstream.yaml, or
// refused with -skewer.strict); a failure that stays fails t. There is no
// third way: behaviour the catalogue does not expect is a failure or a
// waiver, never a note that passes.
func (s *Suite) Judge(t *testing.T, v promise.Verdict) {
	t.Helper()
	v, err := judge(s.waivers, *flagStrict, v)
	if v.Validate() == nil {
		t.Logf("VERDICT %s: %s %s%s", v.ID, v.Outcome, v.Reason, map[bool]string{true: " (" + v.Reference + ")"}[v.Reference != ""])
		s.mu.Lock()
		s.records = append(s.records, Record{Test: t.Name(), Verdict: &v})
		s.mu.Unlock()
	}
	if err != nil {
		t.Error(err)
	}
}

// judge applies the waivers to v and says whether it fails the test: a
// failure that stays, or a verdict that is not valid.
func judge(ws promise.Waivers, strict bool, v promise.Verdict) (promise.Verdict, error) {
	v = ws.Apply(v, strict)
	return v, promise.Failed([]promise.Verdict{v})
}

// writeReport writes the records as Markdown (verdicts other than pass
// first, then figures) and as verdicts.json.
func (s *Suite) writeReport() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) == 0 {
		return nil
	}
	var verdicts, measured []string
	for _, r := range s.records {
		switch {
		case r.Verdict == nil:
			measured = append(measured, fmt.Sprintf("- %s  \n  _%s_\n", r.Text, r.Test))
		case r.Verdict.Outcome != promise.Pass:
			line := fmt.Sprintf("- **%s** %s: %s", r.Verdict.ID, r.Verdict.Outcome, r.Verdict.Reason)
			if r.Verdict.Reference != "" {
				line += " ([upstream](" + r.Verdict.Reference + "))"
			}
			verdicts = append(verdicts, line+"  \n  _"+r.Test+"_\n")
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n", s.Cluster.Name)
	if len(verdicts) > 0 {
		fmt.Fprintf(&b, "\n### Verdicts other than pass\n\n%s", strings.Join(verdicts, ""))
	}
	if len(measured) > 0 {
		fmt.Fprintf(&b, "\n### Measured\n\n%s", strings.Join(measured, ""))
	}
	if err := os.MkdirAll(s.Artifacts, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(s.records, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Artifacts, "records.json"), js, 0o644); err != nil {
		return err
	}
	path := filepath.Join(s.Artifacts, "report.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "suite: report in %s\n%s", path, b.String())
	if summary := os.Getenv("GITHUB_STEP_SUMMARY"); summary != "" {
		f, err := os.OpenFile(summary, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(b.String() + "\n")
		return err
	}
	return nil
}

// LogWriter writes what it is given to t's log, a line per write: the
// progress of a Runner or a Builder, kept with the test it belongs to.
func LogWriter(t *testing.T) io.Writer { return logWriter{t} }

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
