// Package rollout replaces a cluster's control planes from one Kubernetes
// version to the next as a plain list of named Actions, run by one Runner
// that logs and times every step and stops at the first failure.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// Action is one named change to a cluster.
type Action interface {
	Name() string
	// Node is the node the action changes, once it has run ("" for a
	// change to the cluster as a whole): what restarts there is its doing.
	Node() string
	Execute(ctx context.Context, c *cluster.Cluster) error
}

// actionFunc is an Action made of a name and a function.
type actionFunc struct {
	name string
	node func() string
	fn   func(ctx context.Context, c *cluster.Cluster) error
}

func (a actionFunc) Name() string { return a.name }
func (a actionFunc) Node() string {
	if a.node == nil {
		return ""
	}
	return a.node()
}
func (a actionFunc) Execute(ctx context.Context, c *cluster.Cluster) error {
	return a.fn(ctx, c)
}

// Do makes an Action of a name and a function that changes the cluster
// as a whole.
func Do(name string, fn func(ctx context.Context, c *cluster.Cluster) error) Action {
	return actionFunc{name: name, fn: fn}
}

// DoOn is Do for an action that changes one node: node says which once
// the action has run (a joiner's name is known only then).
func DoOn(node func() string, name string, fn func(ctx context.Context, c *cluster.Cluster) error) Action {
	return actionFunc{name: name, node: node, fn: fn}
}

// on is the node name, for DoOn.
func on(name string) func() string { return func() string { return name } }

// Step is the record of one executed Action.
type Step struct {
	Name string
	// Node is the node it changed (Action.Node).
	Node     string
	Start    time.Time
	Duration time.Duration
	Err      error
}

// Guard watches a rollout's signals: asked after each step, once OnStep
// has named what follows, whether the rollout may go on.
type Guard interface {
	// After is told of the step that just succeeded; an error is a breach
	// that halts the rollout before anything else runs.
	After(ctx context.Context, done Step) error
}

// Halted is how a Runner ends when its Guard saw a breach: the step after
// which it stopped, and the breach.
type Halted struct {
	After  string
	Breach error
}

func (h *Halted) Error() string {
	return fmt.Sprintf("halted by the rollout guard after %q: %v", h.After, h.Breach)
}

func (h *Halted) Unwrap() error { return h.Breach }

// AsHalted is the halt err carries, if any.
func AsHalted(err error) (*Halted, bool) {
	var h *Halted
	ok := errors.As(err, &h)
	return h, ok
}

// Runner executes Actions in order.
type Runner struct {
	Out   io.Writer
	Steps []Step
	// OnStep, when set, is called before each step with its name, and with
	// "done" after the last: traffic probes mark their phases by it.
	OnStep func(ctx context.Context, name string)
	// Guard, when set, is asked after each step (the last too) whether the
	// rollout may go on.
	Guard   Guard
	guarded int // the steps the Guard was asked about
}

func (r *Runner) onStep(ctx context.Context, name string) {
	if r.OnStep != nil {
		r.OnStep(ctx, name)
	}
}

// Run executes actions until one fails, printing a line per step with its
// elapsed time. The error names the step that failed.
func (r *Runner) Run(ctx context.Context, c *cluster.Cluster, actions []Action) error {
	start := time.Now()
	for i, a := range actions {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted before %q: %w", a.Name(), err)
		}
		r.onStep(ctx, a.Name())
		if err := r.guard(ctx); err != nil {
			return err
		}
		s := Step{Name: a.Name(), Start: time.Now()}
		r.printf("[%7s] (%d/%d) %s ...", since(start), i+1, len(actions), a.Name())
		s.Err = a.Execute(ctx, c)
		s.Duration, s.Node = time.Since(s.Start), a.Node()
		r.Steps = append(r.Steps, s)
		if s.Err != nil {
			r.printf("[%7s] ✗ %s (%s): %v", since(start), a.Name(), s.Duration.Round(100*time.Millisecond), s.Err)
			return fmt.Errorf("step %q failed: %w", a.Name(), s.Err)
		}
		r.printf("[%7s] ✓ %s (%s)", since(start), a.Name(), s.Duration.Round(100*time.Millisecond))
	}
	r.onStep(ctx, "done")
	return r.guard(ctx)
}

// guard asks the Guard about the last step run, if one ran since the
// Runner was last asked: a breach halts the rollout there.
func (r *Runner) guard(ctx context.Context) error {
	if r.Guard == nil || len(r.Steps) == 0 || r.guarded == len(r.Steps) {
		return nil
	}
	r.guarded = len(r.Steps)
	last := r.Steps[len(r.Steps)-1]
	if err := r.Guard.After(ctx, last); err != nil {
		h := &Halted{After: last.Name, Breach: err}
		r.printf("✗ %v", h)
		return h
	}
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func (r *Runner) printf(format string, args ...any) {
	if r.Out != nil {
		fmt.Fprintf(r.Out, format+"\n", args...)
	}
}
