package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// The certification workflow's matrix is .github/pairs.json: every pair in
// it is one certify accepts, and `make certify` defaults to its first.
func TestWorkflowPairs(t *testing.T) {
	raw, err := os.ReadFile("../../.github/pairs.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Pairs []struct{ From, To string } `json:"pairs"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("pairs.json: %v", err)
	}
	if len(file.Pairs) == 0 {
		t.Fatal("pairs.json names no pair")
	}
	for _, p := range file.Pairs {
		var stdout, stderr bytes.Buffer
		if code := Run(context.Background(), []string{"certify", "--from", p.From, "--to", p.To, "--dry-run"}, &stdout, &stderr); code != 0 {
			t.Errorf("%s -> %s: exit %d: %s", p.From, p.To, code, stderr.String())
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("Makefile sets no default %s", name)
		}
		return string(m[1])
	}
	if from, to := def("FROM"), def("TO"); from != file.Pairs[0].From || to != file.Pairs[0].To {
		t.Errorf("make certify defaults to %s -> %s, pairs.json's first pair is %s -> %s", from, to, file.Pairs[0].From, file.Pairs[0].To)
	}
}
