package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/skewer-k8s/skewer/harness/promise"
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
		if code := Run(context.Background(), []string{"certify", "--from", p.From, "--to", p.To, "--dry-run", "--ignore-preflight-errors=all"}, &stdout, &stderr); code != 0 {
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

// The workflow splits the surge run in shards that together cover every
// area of the catalogue (a new area needs a shard, or it goes unjudged),
// and its merge job joins exactly the cells the matrix runs.
func TestWorkflowShardsCoverTheCatalogue(t *testing.T) {
	raw, err := os.ReadFile("../../.github/workflows/certify.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					Cell []struct{ Strategy, Shard string }
				}
			}
			Steps []struct{ Name, Run string }
		}
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	covered := map[string]map[string]bool{}
	var merge string
	for _, s := range wf.Jobs["merge"].Steps {
		if s.Name == "skewer report merge" {
			merge = s.Run
		}
	}
	for _, c := range wf.Jobs["certify"].Strategy.Matrix.Cell {
		if covered[c.Strategy] == nil {
			covered[c.Strategy] = map[string]bool{}
		}
		shard := c.Shard
		if shard == "" {
			shard = "whole"
			for _, a := range promise.Areas() {
				covered[c.Strategy][a] = true
			}
		}
		for _, a := range strings.Split(c.Shard, ",") {
			covered[c.Strategy][a] = true
		}
		if cell := "certify-$FROM-$TO-" + c.Strategy + "-" + shard; !strings.Contains(merge, cell) {
			t.Errorf("the merge job does not join %s", cell)
		}
	}
	for _, s := range []string{"surge", "in-place"} {
		for _, a := range promise.Areas() {
			if a != "cluster" && !covered[s][a] {
				t.Errorf("no %s cell of the workflow judges the %s area", s, a)
			}
		}
	}
}
