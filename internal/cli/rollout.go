package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/rollout"
)

// record is what a rollout leaves in the cluster's directory, so that a
// rollback knows where to return.
type record struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Strategy string `json:"strategy"`
	// ControlPlanes is how many there were when the rollout began: a
	// rollback ends with as many.
	ControlPlanes int `json:"controlPlanes"`
}

func recordPath(c *cluster.Cluster) string { return filepath.Join(c.Dir, "rollout.json") }

type rolloutFlags struct {
	name, to, strategy, imageSource string
	pauseAfter                      int
}

func rolloutCommand() *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:     "rollout",
		Short:   "Replace the control planes with --to, one at a time",
		Example: "  skewer rollout --to v1.36.3 --pause-after 1",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.to == "" {
				return fmt.Errorf("--to is required (e.g. --to v1.36.3)")
			}
			if f.strategy != "surge" && f.strategy != "in-place" {
				return fmt.Errorf("unknown strategy %q: want surge or in-place", f.strategy)
			}
			return runRollout(cmd, f, false)
		},
	}
	cmd.Flags().StringVar(&f.name, "name", "skewer-ha", "cluster name")
	cmd.Flags().StringVar(&f.to, "to", "", "target Kubernetes version")
	cmd.Flags().StringVar(&f.strategy, "strategy", "surge", "surge (join new, remove old) or in-place (kubeadm upgrade)")
	cmd.Flags().IntVar(&f.pauseAfter, "pause-after", 0, "stop after this many control planes (0: all), holding the mixed window")
	cmd.Flags().StringVar(&f.imageSource, "image-source", "build", "where the target node image comes from: build, local or pull")
	return cmd
}

func rollbackCommand() *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Return every control plane to the version the last rollout started from",
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.strategy = "surge"
			return runRollout(cmd, f, true)
		},
	}
	cmd.Flags().StringVar(&f.name, "name", "skewer-ha", "cluster name")
	cmd.Flags().StringVar(&f.to, "to", "", "version to return to (default: where the last rollout started)")
	cmd.Flags().StringVar(&f.imageSource, "image-source", "build", "where the node image comes from: build, local or pull")
	return cmd
}

func runRollout(cmd *cobra.Command, f rolloutFlags, rollback bool) error {
	ctx := cmd.Context()
	out := cmd.ErrOrStderr()
	src, err := nodeimage.ParseSource(f.imageSource)
	if err != nil {
		return err
	}
	c, err := cluster.Open(ctx, f.name, cluster.Options{Out: out})
	if err != nil {
		return err
	}
	var rec record
	if raw, err := os.ReadFile(recordPath(c)); err == nil {
		_ = json.Unmarshal(raw, &rec)
	}
	to := f.to
	if rollback && to == "" {
		if rec.From == "" {
			return fmt.Errorf("no rollout recorded for %q: say where to return with --to", f.name)
		}
		to = rec.From
	}
	if _, err := nodeimage.ParseVersion(to); err != nil {
		return err
	}
	before, err := rollout.Census(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "control planes before:\n%s", rollout.Describe(before))
	start := time.Now()
	runner := &rollout.Runner{Out: out}
	var actions []rollout.Action
	switch {
	case rollback:
		// Whatever an interrupted rollout left half done goes first; the
		// moves back are planned on what is left.
		if err := runner.Run(ctx, c, rollout.Recover()); err != nil {
			return report(c, runner, err, f.name)
		}
		actions, err = rollout.Surge(ctx, c, rollout.SurgeInput{To: to, AllowDowngrade: true, ControlPlanes: rec.ControlPlanes})
	case f.strategy == "in-place":
		v, _ := nodeimage.ParseVersion(to)
		var art *nodeimage.Artifacts
		if art, err = (&nodeimage.Builder{Out: out}).Artifacts(ctx, v); err == nil {
			actions, err = rollout.InPlace(ctx, c, rollout.InPlaceInput{To: to, PauseAfter: f.pauseAfter, Artifacts: art})
		}
	default:
		actions, err = rollout.Surge(ctx, c, rollout.SurgeInput{To: to, PauseAfter: f.pauseAfter})
	}
	if err != nil {
		return err
	}
	if len(actions) > 0 && f.strategy == "surge" {
		r := &nodeimage.Resolver{Source: src, Out: out}
		if _, err := r.Resolve(ctx, to); err != nil {
			return err
		}
	}
	if !rollback {
		from, err := c.KubernetesVersion(ctx)
		if err != nil {
			return err
		}
		if rec.From == "" || rec.To != to {
			rec = record{From: from, To: to, Strategy: f.strategy, ControlPlanes: len(before)}
		}
		raw, _ := json.Marshal(rec)
		if err := os.WriteFile(recordPath(c), raw, 0o644); err != nil {
			return err
		}
	}
	if err := runner.Run(ctx, c, actions); err != nil {
		return report(c, runner, err, f.name)
	}
	_ = report(c, runner, nil, f.name)
	if rollback {
		_ = os.Remove(recordPath(c))
	}
	fmt.Fprintf(out, "done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// report says, whatever happened, exactly which control plane runs what,
// and how to recover from a failure.
func report(c *cluster.Cluster, r *rollout.Runner, err error, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if after, cerr := rollout.Census(ctx, c); cerr == nil {
		fmt.Fprintf(r.Out, "control planes after:\n%s", rollout.Describe(after))
	}
	if err != nil {
		return &hinted{err: err, hint: "recover with: skewer rollback --name " + name}
	}
	return nil
}
