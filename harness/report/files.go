package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The names Write writes in its directory.
const (
	ResultsFile = "results.json"
	JUnitFile   = "junit.xml"
	SummaryFile = "summary.md"
	HTMLFile    = "report.html"
)

// Files are what Write writes, in the order it writes them.
var Files = []string{ResultsFile, JUnitFile, SummaryFile, HTMLFile}

// Write writes results.json, junit.xml, summary.md and report.html in dir.
// Each file is written whole or not at all.
func (r *Results) Write(dir string) error {
	if want := r.outcome(); r.Outcome != want {
		return fmt.Errorf("results say %s where the verdicts add up to %s: not written", r.Outcome, want)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := validateSchema(js); err != nil {
		return fmt.Errorf("results do not match their schema: %w", err)
	}
	var junit, html bytes.Buffer
	if err := r.JUnit(&junit); err != nil {
		return err
	}
	if err := r.html(&html, dir); err != nil {
		return err
	}
	files := map[string][]byte{ResultsFile: append(js, '\n'), JUnitFile: junit.Bytes(), SummaryFile: []byte(r.Summary()), HTMLFile: html.Bytes()}
	for _, name := range Files {
		if err := writeAtomic(filepath.Join(dir, name), files[name]); err != nil {
			return err
		}
	}
	return nil
}

// Load reads a results.json, checked against its schema and validated.
func Load(path string) (*Results, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := validateSchema(raw); err != nil {
		return nil, fmt.Errorf("%s does not match the results schema: %w", path, err)
	}
	var r Results
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func validateSchema(doc []byte) error {
	c := jsonschema.NewCompiler()
	schema, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return fmt.Errorf("the embedded schema: %w", err)
	}
	if err := c.AddResource(SchemaID, schema); err != nil {
		return err
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		return fmt.Errorf("the embedded schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

func writeAtomic(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
