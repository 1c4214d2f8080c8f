// Package report is what a certification publishes: results.json (its
// JSON Schema is results.schema.json, embedded), a JUnit file with one
// test case per promise, a Markdown summary for a CI step summary, and a
// self-contained report.html. Everything is rendered from Results alone,
// so a report can be made again from a results.json.
package report

import (
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// SchemaID names the form of results.json; a change that breaks a reader
// takes a new one.
const SchemaID = "https://github.com/skewer-k8s/skewer/harness/report/v2/results.schema.json"

//go:embed results.schema.json
var schemaJSON []byte

// Schema is results.schema.json, for users' tools.
func Schema() []byte { return append([]byte(nil), schemaJSON...) }

// Results is one certification: a version pair, taken through one run per
// strategy, every promise of the catalogue with a verdict in each run.
type Results struct {
	Schema   string    `json:"$schema"`
	Tool     Tool      `json:"tool"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Outcome is incomplete when the certification was cut short, else
	// fail when any promise failed or could not be judged in any run,
	// else pass.
	Outcome promise.Outcome `json:"outcome"`
	Runs    []Run           `json:"runs"`
	// Incomplete says why the certification stopped before its end (an
	// interruption): the runs it holds may lack strategies, and promises a
	// run did not reach are errors with that reason. Empty when it ran
	// through.
	Incomplete string `json:"incomplete,omitempty"`
	// Strict is --strict: every waiver was refused.
	Strict bool `json:"strict"`
	// Coverage is how much of the catalogue was judged.
	Coverage Coverage `json:"coverage"`
	// Budget is what rollout.disruption-budget held the traffic to.
	Budget *promise.Budget `json:"budget,omitempty"`
	// GuardThresholds are what the rollout guard held every step of a
	// rollout under the traffic to.
	GuardThresholds *promise.GuardThresholds `json:"guardThresholds,omitempty"`
	// Host and Images say what the verdicts were reached on.
	Host   *Host       `json:"host,omitempty"`
	Images []NodeImage `json:"images,omitempty"`
}

// Host is the machine a certification ran on.
type Host struct {
	Kernel string `json:"kernel"`
	Cgroup string `json:"cgroup"` // v1 or v2
	Cores  int    `json:"cores"`
	Docker string `json:"docker,omitempty"`
}

// NodeImage is one version's node image as the runs used it.
type NodeImage struct {
	Version string `json:"version"`
	Ref     string `json:"ref"`
	// ID is the image's content digest (Docker's image ID).
	ID string `json:"id"`
	// Key is the digest of a local build's inputs (the io.skewer.key label).
	Key string `json:"key,omitempty"`
	// Given says what its vendor brought for this version; absent for
	// skewer's own build from the Go module proxy.
	Given *Given `json:"given,omitempty"`
	// FeatureGates are the apiserver feature gates its vendor configured
	// for this version (certify --apiserver-feature-gates).
	FeatureGates map[string]bool `json:"apiserverFeatureGates,omitempty"`
}

// Given is what a vendor brought for one version of the pair.
type Given struct {
	// Kind is node-image (used as it is), release-tarball, binaries or
	// source-tree (a node image built around them).
	Kind string `json:"kind"`
	// Path is the tarball or directory given.
	Path string `json:"path,omitempty"`
	// SHA256 is the tarball's digest.
	SHA256 string `json:"sha256,omitempty"`
	// Commit and Dirty are a source tree's: the commit it was built from,
	// and whether the tree had changes to it.
	Commit string `json:"commit,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`
	// Binaries are the sha256 of each binary, by name.
	Binaries map[string]string `json:"binaries,omitempty"`
}

// What names what was given in a few words: its kind, path and, for a
// source tree, its commit.
func (g *Given) What() string {
	what := strings.TrimSpace(g.Kind + " " + g.Path)
	if g.Commit != "" {
		what += " at " + g.Commit
		if g.Dirty {
			what += " with changes"
		}
	}
	return what
}

// Tool is what made the results.
type Tool struct {
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, with +dirty
	// when the tree had changes; empty when the build did not record it.
	Commit string `json:"commit,omitempty"`
	Go     string `json:"go"`
	Kind   string `json:"kind"`
}

// Run is the pair taken through one strategy on one cluster.
type Run struct {
	Strategy string `json:"strategy"`
	// Shard is the areas of the catalogue the run judged when the
	// certification was split (certify --shard proxy,...): the rest are
	// not-selected here, judged by another shard's run. Empty for a
	// certification run whole.
	Shard    string   `json:"shard,omitempty"`
	Cluster  string   `json:"cluster"`
	Phases   []Phase  `json:"phases"`
	Promises []Result `json:"promises"`
	// Disruption is how each backend fared through the run's traffic.
	Disruption []Backend `json:"disruption,omitempty"`
	// Steps is how requests through the load balancer fared in each
	// phase of the traffic (a rollout's step), in order.
	Steps []StepLatency `json:"steps,omitempty"`
	// Components are what each node ran, as the running cluster reported
	// it, read when the cluster was created and again at the end.
	Components map[string][]Component `json:"components,omitempty"`
	// Events are what the run's monitor saw happen (a restart, a node not
	// Ready, an eviction), each meant by the phase under way or not.
	Events []Event `json:"events,omitempty"`
	// Guard is each guarded rollout's signal table, in the order they ran.
	Guard []GuardedRollout `json:"guard,omitempty"`
	// Memory is the most the run held at once, from its cluster's
	// creation to its last verdict.
	Memory *Memory `json:"memory,omitempty"`
	// Canary is the sidecar migration's canary compared side by side.
	Canary *Canary `json:"canary,omitempty"`
}

// Label names the run in a report: its strategy, and its shard when the
// certification was split.
func (r Run) Label() string {
	if r.Shard == "" {
		return r.Strategy
	}
	return r.Strategy + ", shard " + r.Shard
}

// Event is one instant on a run's timeline.
type Event struct {
	Time  time.Time `json:"time"`
	Kind  string    `json:"kind"`
	Text  string    `json:"text"`
	Meant bool      `json:"meant"`
}

// Backend is one row of a run's disruption table: the load balancer
// ("lb") or one apiserver addressed directly, through the whole run.
type Backend struct {
	Target string `json:"target"`
	// Conn is the kind of connection: "reused" (kept alive between
	// requests) or "new" (one per request). Empty in results written
	// before the two were told apart, which were reused.
	Conn     string      `json:"conn,omitempty"`
	Requests int         `json:"requests"`
	Failed   int         `json:"failed"` // 5xx, or no response at all
	Codes    map[int]int `json:"codes"`  // 0 counts requests that got no response
	// P50 and P99 are the latencies of the requests that got a response.
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	// Unavailable is the longest stretch from a failed request to the
	// next one that succeeded (or to the last, when none did after it).
	Unavailable time.Duration `json:"unavailable"`
}

// StepLatency is how the requests through the load balancer on one kind
// of connection fared while one phase of the traffic lasted.
type StepLatency struct {
	Phase    string        `json:"phase"`
	Conn     string        `json:"conn"`
	Requests int           `json:"requests"`
	Failed   int           `json:"failed"`
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	// First and Last are when the first and the last of the requests
	// were sent: where the step lies on the run's timeline. Zero in
	// results written before they were recorded.
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
}

// Connections is Conn, with results from before it was recorded read as
// what they were: reused.
func (b Backend) Connections() string {
	if b.Conn == "" {
		return "reused"
	}
	return b.Conn
}

// Component is what one node ran.
type Component struct {
	Node    string `json:"node"`
	Role    string `json:"role"`
	Kubelet string `json:"kubelet"`
	// APIServer and APIServerFlags are a control plane's: the version its
	// apiserver answers /version with, and the command line of its static
	// Pod (feature gates and runtime-config among them).
	APIServer      string   `json:"apiserver,omitempty"`
	APIServerFlags []string `json:"apiserverFlags,omitempty"`
}

// Phase is a span of the run's timeline: a transition, a fault, a check.
type Phase struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Error is how the phase ended when it did not finish.
	Error string `json:"error,omitempty"`
	// Node is the node a rollout's step changed.
	Node string `json:"node,omitempty"`
	// Steps are the steps of the rollouts the phase ran, in order: where
	// a phase's time went.
	Steps []Phase `json:"steps,omitempty"`
}

// Result is a promise's verdict in a run, with its statement and what was
// measured on the way.
type Result struct {
	promise.Verdict
	Statement string   `json:"statement"`
	Measured  []string `json:"measured,omitempty"`
}

// New starts the results of a certification of pair.
func New(pair promise.Pair, tool Tool, started time.Time) *Results {
	return &Results{Schema: SchemaID, Tool: tool, From: pair.From.String(), To: pair.To.String(), Started: started}
}

// Finish closes the results at end (Incomplete, when the run was cut
// short, is set before): every verdict is checked, the runs' promises
// sorted by ID, the coverage counted and the outcome set.
func (r *Results) Finish(end time.Time) error {
	r.Finished = end
	for i := range r.Runs {
		run := &r.Runs[i]
		sort.Slice(run.Promises, func(a, b int) bool { return run.Promises[a].ID < run.Promises[b].ID })
		for j := range run.Promises {
			p := &run.Promises[j]
			if cat, ok := promise.Lookup(p.ID); ok {
				p.Statement = cat.Statement
			}
		}
	}
	r.Outcome, r.Coverage = r.outcome(), r.coverage()
	return r.Validate()
}

// outcome is what the runs add up to: never a pass when the run was cut
// short or any promise failed or could not be judged.
func (r *Results) outcome() promise.Outcome {
	if r.Incomplete != "" {
		return promise.Incomplete
	}
	for _, run := range r.Runs {
		for _, p := range run.Promises {
			if p.Outcome.Fails() {
				return promise.Fail
			}
		}
	}
	return promise.Pass
}

// Validate refuses results a report could not stand on: a run that leaves
// out a promise of the catalogue or judges one twice, an invalid verdict,
// a phase that ends before it starts.
func (r *Results) Validate() error {
	var errs []error
	if len(r.Runs) == 0 && r.Incomplete == "" {
		errs = append(errs, errors.New("results hold no run"))
	}
	if want := r.outcome(); r.Outcome != want {
		errs = append(errs, fmt.Errorf("the outcome says %s where the verdicts add up to %s", r.Outcome, want))
	}
	for _, run := range r.Runs {
		seen := map[promise.ID]bool{}
		for _, p := range run.Promises {
			if err := p.Verdict.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("run %s: %w", run.Strategy, err))
			}
			if seen[p.ID] {
				errs = append(errs, fmt.Errorf("run %s: %s has two verdicts", run.Strategy, p.ID))
			}
			seen[p.ID] = true
		}
		for _, p := range promise.Catalogue() {
			if !seen[p.ID] {
				errs = append(errs, fmt.Errorf("run %s: %s has no verdict", run.Strategy, p.ID))
			}
		}
		for _, ph := range run.Phases {
			if ph.End.Before(ph.Start) {
				errs = append(errs, fmt.Errorf("run %s: phase %q ends before it starts", run.Strategy, ph.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// Counts is how many promises of the results had each outcome, over all
// runs.
func (r *Results) Counts() map[promise.Outcome]int {
	out := map[promise.Outcome]int{}
	for _, run := range r.Runs {
		for _, p := range run.Promises {
			if !r.elsewhere(run, p.Verdict) {
				out[p.Outcome]++
			}
		}
	}
	return out
}

// own is run's promises less those another shard's run judges, and how
// many those are: what a report shows of the run.
func (r *Results) own(run Run) (promises []Result, elsewhere int) {
	for _, p := range run.Promises {
		if r.elsewhere(run, p.Verdict) {
			elsewhere++
		} else {
			promises = append(promises, p)
		}
	}
	return promises, elsewhere
}

// elsewhere says v is a promise this run did not select that another run
// of the same strategy did: a shard's leaving it to the shard that judges
// it, not a promise left out of the certification.
func (r *Results) elsewhere(run Run, v promise.Verdict) bool {
	if v.Outcome != promise.NotSelected {
		return false
	}
	for _, other := range r.Runs {
		if other.Strategy != run.Strategy || other.Shard == run.Shard {
			continue
		}
		for _, p := range other.Promises {
			if p.ID == v.ID && p.Outcome != promise.NotSelected {
				return true
			}
		}
	}
	return false
}
