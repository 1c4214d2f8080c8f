package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// notInCI are the certify flags the action (action.yml) leaves out, each
// for its reason: a CI step writes its results once and reports them.
var notInCI = map[string]string{
	"dry-run":                 "prints a plan; a CI step certifies",
	"list":                    "prints the catalogue; a CI step certifies",
	"retain":                  "a runner's clusters end with its job",
	"force":                   "always given: the step owns its out",
	"ignore-preflight-errors": "a runner that fails the preflight cannot certify",
	"name":                    "one certification a runner: the default name",
	"profile":                 "the one HA profile certify accepts",
	"image-source":            "a runner builds what its cache lacks",
	"help":                    "cobra's",
}

type actionFile struct {
	Inputs map[string]struct {
		Description string
		Required    bool
		Default     *string
	}
	Runs struct {
		Steps []struct {
			Name string
			Env  map[string]string
			Run  string
		}
	}
}

// readAction reads action.yml and the script and environment of its step
// that runs certify.
func readAction(t *testing.T) (action actionFile, run string, env map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &action); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	for _, s := range action.Runs.Steps {
		if s.Name == "skewer certify" {
			run, env = s.Run, s.Env
		}
	}
	if run == "" {
		t.Fatal(`action.yml has no step "skewer certify"`)
	}
	return action, run, env
}

// The action's inputs are certify's flags: each input reaches its flag
// (through the environment, by the name the script derives), and each
// flag a CI step can use is an input, so a new flag is not forgotten.
func TestActionInputsAreCertifyFlags(t *testing.T) {
	action, run, env := readAction(t)
	var listed []string
	for _, m := range regexp.MustCompile(`for flag in ([a-z -]+); do`).FindAllStringSubmatch(run, -1) {
		listed = append(listed, strings.Fields(m[1])...)
	}
	flags := certifyCommand().Flags()
	for name, in := range action.Inputs {
		if name == "make-room" {
			continue
		}
		if flags.Lookup(name) == nil {
			t.Errorf("input %s is no flag of skewer certify", name)
		}
		if !slices.Contains(listed, name) {
			t.Errorf("input %s is not passed on by the certify step's script", name)
		}
		if v, want := env["IN_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))], fmt.Sprintf("${{ inputs.%s }}", name); v != want {
			t.Errorf("input %s reaches the script as %q, want %q", name, v, want)
		}
		if in.Description == "" || (!in.Required && in.Default == nil) {
			t.Errorf("input %s wants a description and, unless required, a default", name)
		}
	}
	flags.VisitAll(func(f *pflag.Flag) {
		if _, ok := action.Inputs[f.Name]; !ok && notInCI[f.Name] == "" {
			t.Errorf("certify's --%s has no input in action.yml (or a reason in notInCI)", f.Name)
		}
	})
}

// The workflow's own inputs (dispatch and call) are the action's, passed
// on under the same name, besides those that say what to check out and
// download; what dispatch offers, a call offers too.
func TestWorkflowInputsAreTheActions(t *testing.T) {
	action, _, _ := readAction(t)
	raw, err := os.ReadFile("../../.github/workflows/certify.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On struct {
			Dispatch struct {
				Inputs map[string]struct{ Type string }
			} `yaml:"workflow_dispatch"`
			Call struct {
				Inputs map[string]struct{ Type string }
			} `yaml:"workflow_call"`
		} `yaml:"on"`
		Jobs map[string]struct {
			Steps []struct {
				Uses string
				With map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	var with map[string]string
	for _, s := range wf.Jobs["certify"].Steps {
		if s.Uses == "./" {
			with = s.With
		}
	}
	if with == nil {
		t.Fatal("the certify job does not run the repository's action (uses: ./)")
	}
	call := wf.On.Call.Inputs
	for name := range wf.On.Dispatch.Inputs {
		if _, ok := call[name]; !ok {
			t.Errorf("workflow_dispatch offers %s, workflow_call does not", name)
		}
	}
	for name := range call {
		switch name {
		case "skewer-repository", "skewer-ref", "build-artifact":
			continue
		case "from", "to":
			// The pair reaches the action through the matrix.
			if !strings.Contains(with[name], "matrix.pair."+name) {
				t.Errorf("the action's %s is %q, not the matrix's pair", name, with[name])
			}
			continue
		}
		if _, ok := action.Inputs[name]; !ok {
			t.Errorf("workflow input %s is no input of action.yml", name)
		}
		if !strings.Contains(with[name], "inputs."+name) {
			t.Errorf("workflow input %s does not reach the action (with: %s: %q)", name, name, with[name])
		}
	}
	// Every action is pinned by commit.
	for _, f := range []string{"../../action.yml", "../../.github/workflows/certify.yml", "../../.github/workflows/test.yml", "../../.github/workflows/release.yml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*(?:- )?uses: ([^\s#]+)`).FindAllStringSubmatch(string(raw), -1) {
			if ref := m[1]; !strings.HasPrefix(ref, "./") && !regexp.MustCompile(`@[0-9a-f]{40}$`).MatchString(ref) {
				t.Errorf("%s: %s is not pinned by commit", f, ref)
			}
		}
	}
}

// The certify step's own script, run by bash with every input set, gives
// certify the flags those inputs name: list inputs one flag a line, values
// with spaces kept whole, empty inputs left to certify's defaults.
func TestActionScriptPassesTheInputs(t *testing.T) {
	_, run, _ := readAction(t)
	// RUNNER_TEMP/skewer stands for the binary: it prints its arguments,
	// one a line, for certify's own flag set to parse below.
	tmp := t.TempDir()
	if err := os.WriteFile(tmp+"/skewer", []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-c", run)
	cmd.Env = append(os.Environ(), "RUNNER_TEMP="+tmp,
		"IN_FROM=v1.35.4", "IN_TO=v1.36.3", "IN_STRATEGY=surge", "IN_STRICT=true",
		"IN_KUBERNETES=to=build/a b.tar.gz\n\nfrom=build/old",
		"IN_APISERVER_FEATURE_GATES=to:UnknownVersionInteroperabilityProxy=false",
		"IN_ONLY=proxy.route.verbs,rollout.membership", "IN_MAX_UNAVAILABLE=20s", "IN_OUT=results",
		"IN_GUARD=minSample=20\nconfidence=0.999")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the step's script: %v", err)
	}
	args := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if args[0] != "certify" {
		t.Fatalf("the script runs skewer %q, want certify", args[0])
	}
	c := certifyCommand()
	if err := c.ParseFlags(args[1:]); err != nil {
		t.Fatalf("certify refuses the script's flags %q: %v", args[1:], err)
	}
	f := c.Flags()
	for name, want := range map[string]string{
		"from": "v1.35.4", "to": "v1.36.3", "strategy": "surge", "strict": "true", "force": "true",
		"kubernetes":              "[from=build/old,to=build/a b.tar.gz]",
		"apiserver-feature-gates": "[to:UnknownVersionInteroperabilityProxy=false]",
		"only":                    "[proxy.route.verbs,rollout.membership]",
		"max-unavailable":         "20s", "out": "results",
		"guard": "[minSample=20,confidence=0.999]",
		// Not given: certify's own defaults.
		"shard": "[]", "deadline": "0s", "waivers": "", "guard-file": "",
	} {
		if got := f.Lookup(name).Value.String(); got != want {
			t.Errorf("--%s is %q, want %q (argv %q)", name, got, want, args)
		}
	}
	if f.Changed("max-failed") || f.Changed("skip") {
		t.Errorf("an input left empty set its flag: argv %q", args)
	}
}
