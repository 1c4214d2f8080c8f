package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
)

// Strategy is how control planes move to another version.
type Strategy string

const (
	// StrategySurge joins a node at the new version, then drains and
	// removes an old one, one at a time.
	StrategySurge Strategy = "surge"
	// StrategyInPlace runs kubeadm upgrade on each node.
	StrategyInPlace Strategy = "in-place"
)

// ParseStrategy validates a strategy's name.
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case StrategySurge, StrategyInPlace:
		return Strategy(s), nil
	}
	return "", fmt.Errorf("unknown strategy %q: want surge or in-place", s)
}

// RollInput says where a rollout goes and how.
type RollInput struct {
	To       version.Version
	Strategy Strategy
	// PauseAfter stops after this many control planes (0: all), holding
	// the cluster in the mixed window.
	PauseAfter int
	// Images finds To's node image (default: a current local one, else
	// built offline).
	Images *nodeimage.Resolver
	// Runner runs the steps (default: one that prints nothing).
	Runner *Runner
	// Staged says To's images were loaded into every node before the
	// rollout (StageImages): an in-place rollout does not load them again.
	Staged bool
}

// Validate refuses input that cannot describe a rollout.
func (in RollInput) Validate() error {
	if err := checkMove("a rollout", in.To, in.PauseAfter); err != nil {
		return err
	}
	_, err := ParseStrategy(string(in.Strategy))
	return err
}

// checkMove refuses what no move of the control planes can do: go nowhere,
// or pause after a negative count. what names the move in the error.
func checkMove(what string, to version.Version, pauseAfter int) error {
	switch {
	case to.IsZero():
		return errors.New(what + " needs a target version")
	case pauseAfter < 0:
		return fmt.Errorf("pause after %d control planes: cannot be negative", pauseAfter)
	}
	return nil
}

// Roll moves the cluster's control planes to in.To. Everything that can be
// refused is refused before the cluster changes: the skew, a downgrade, a
// control plane that is not HA, a target image that cannot be had. It
// records where it started (rollout.json in the cluster's directory) so
// that Rollback, in this process or another after a Ctrl-C, knows where
// to return.
func Roll(ctx context.Context, c *cluster.Cluster, in RollInput) error {
	if err := in.Validate(); err != nil {
		return err
	}
	rec, err := LoadRecord(c)
	if err != nil {
		return err
	}
	images, runner := resolverOr(in.Images, in.Runner), runnerOr(in.Runner)
	var actions []Action
	if in.Strategy == StrategyInPlace {
		actions, err = planInPlace(ctx, c, in, images)
	} else {
		actions, err = planSurge(ctx, c, in, images)
	}
	if err != nil {
		return err
	}
	// A rollout resumed after a pause or an interruption keeps the record
	// of where the first part started.
	if rec == nil || !rec.To.Equal(in.To) {
		// Counted before any step runs: a rollback ends with as many.
		members, err := Census(ctx, c)
		if err != nil {
			return err
		}
		from, err := ClusterVersion(ctx, c)
		if err != nil {
			return err
		}
		rec = &Record{From: from, To: in.To, Strategy: in.Strategy, ControlPlanes: len(members)}
	}
	if err := rec.save(c); err != nil {
		return err
	}
	return runner.Run(ctx, c, actions)
}

// planInPlace checks the move first, then builds what kubeadm upgrade needs.
func planInPlace(ctx context.Context, c *cluster.Cluster, in RollInput, images *nodeimage.Resolver) ([]Action, error) {
	if _, _, err := toMove(ctx, c, in.To, false); err != nil {
		return nil, err
	}
	art, err := images.Artifacts(ctx, in.To)
	if err != nil {
		return nil, err
	}
	return inPlace(ctx, c, inPlaceInput{To: in.To, PauseAfter: in.PauseAfter, Artifacts: art, Staged: in.Staged})
}

// StageImages loads to's component images into the nodes that run them
// (loadImages) ahead of an in-place rollout (then given Staged), as an
// operator pre-pulls them before `kubeadm upgrade`: copying them is not
// the upgrade, and under a rollout's traffic it was the first step's
// 163 s (123 s before it).
func StageImages(ctx context.Context, c *cluster.Cluster, to version.Version, images *nodeimage.Resolver) error {
	art, err := resolverOr(images, nil).Artifacts(ctx, to)
	if err != nil {
		return err
	}
	return loadImages(ctx, c, art)
}

// RollbackInput says where a rollback returns.
type RollbackInput struct {
	// To is the version to return to (default: where the recorded rollout
	// started).
	To version.Version
	// Images finds To's node image (default: a current local one, else
	// built offline).
	Images *nodeimage.Resolver
	// Runner runs the steps (default: one that prints nothing).
	Runner *Runner
}

// Rollback returns every control plane to where the last rollout started
// (or in.To), by surge, since kubeadm does not downgrade. What an
// interrupted rollout left half done is recovered first (Recover), and the
// cluster ends with as many control planes as the rollout began with. The
// record goes when the rollback succeeds.
func Rollback(ctx context.Context, c *cluster.Cluster, in RollbackInput) error {
	rec, err := LoadRecord(c)
	if err != nil {
		return err
	}
	to := in.To
	if to.IsZero() {
		if rec == nil {
			return fmt.Errorf("no rollout recorded for %q: say where to return with --to", c.Name)
		}
		to = rec.From
	}
	controlPlanes := 0
	if rec != nil {
		controlPlanes = rec.ControlPlanes
	}
	images, runner := resolverOr(in.Images, in.Runner), runnerOr(in.Runner)
	// The image first: a rollback that cannot finish does not begin.
	if err := useNodeImage(ctx, c, images, to); err != nil {
		return err
	}
	// Whatever an interrupted rollout left half done goes first; the moves
	// back are planned on what is left.
	if err := runner.Run(ctx, c, Recover()); err != nil {
		return err
	}
	actions, err := Surge(ctx, c, SurgeInput{To: to, AllowDowngrade: true, ControlPlanes: controlPlanes})
	if errors.Is(err, ErrNothingToDo) {
		return removeRecord(c)
	}
	if err != nil {
		return err
	}
	if err := runner.Run(ctx, c, actions); err != nil {
		return err
	}
	return removeRecord(c)
}

// planSurge checks the move, then has the cluster start its new nodes
// from To's node image, and gives the joiners and the addon phase the
// host tars of the images of To and of the versions the control planes
// run now (hostTars).
func planSurge(ctx context.Context, c *cluster.Cluster, in RollInput, images *nodeimage.Resolver) ([]Action, error) {
	sin := SurgeInput{To: in.To, PauseAfter: in.PauseAfter}
	if _, err := Surge(ctx, c, sin); err != nil {
		return nil, err
	}
	if err := useNodeImage(ctx, c, images, in.To); err != nil {
		return nil, err
	}
	now, err := NodeVersions(ctx, c)
	if err != nil {
		return nil, err
	}
	if sin.ImageTars, err = hostTars(ctx, images, append(slices.Collect(maps.Values(now)), in.To)...); err != nil {
		return nil, err
	}
	return Surge(ctx, c, sin)
}

// hostTars are the host tars, by the image each holds, of the images of
// each of versions that skewer builds here (its own build, or one around
// a vendor's release): none for a node image given as it is, or one only
// taken from this machine (--image-source=local), whose pieces may not be
// here.
func hostTars(ctx context.Context, images *nodeimage.Resolver, versions ...version.Version) (map[string]string, error) {
	tars := map[string]string{}
	done := map[version.Version]bool{}
	for _, v := range versions {
		_, release := images.Releases[v]
		if done[v] || images.CheckInPlace(v) != nil || (images.Source == nodeimage.SourceLocal && !release) {
			continue
		}
		done[v] = true
		art, err := images.Artifacts(ctx, v)
		if err != nil {
			return nil, err
		}
		maps.Copy(tars, art.Tars)
	}
	return tars, nil
}

// useNodeImage resolves v's node image and has the cluster start its
// nodes of v from it.
func useNodeImage(ctx context.Context, c *cluster.Cluster, images *nodeimage.Resolver, v version.Version) error {
	ref, err := images.Resolve(ctx, v)
	if err != nil {
		return err
	}
	return c.UseNodeImage(v, ref)
}

func runnerOr(r *Runner) *Runner {
	if r == nil {
		return &Runner{}
	}
	return r
}

func resolverOr(r *nodeimage.Resolver, runner *Runner) *nodeimage.Resolver {
	if r != nil {
		return r
	}
	out := runnerOr(runner).Out
	return &nodeimage.Resolver{Source: nodeimage.SourceBuild, Out: out}
}
