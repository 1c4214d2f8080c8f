package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/version"
)

type rolloutFlags struct {
	name, strategy string
	to             version.Version
	images         givenFlags
	pauseAfter     int
}

func rolloutCommand() *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Replace the control planes with --to, one at a time",
		Example: `  skewer rollout --to v1.36.3 --pause-after 1
  skewer rollout --kubernetes to=kubernetes-server-linux-amd64.tar.gz --strategy in-place`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			strategy, err := rollout.ParseStrategy(f.strategy)
			if err != nil {
				return badInput(err)
			}
			return move(cmd, f, func(ctx context.Context, c *cluster.Cluster, to version.Version, images *nodeimage.Resolver, r *rollout.Runner) error {
				return rollout.Roll(ctx, c, rollout.RollInput{To: to, Strategy: strategy, PauseAfter: f.pauseAfter, Images: images, Runner: r})
			})
		},
	}
	cmd.Flags().StringVarP(&f.name, "name", "n", defaultName("skewer-ha"), "cluster name ($SKEWER_CLUSTER_NAME sets the default)")
	cmd.Flags().Var(&f.to, "to", "target Kubernetes version")
	cmd.Flags().StringVar(&f.strategy, "strategy", "surge", "surge (join new, remove old) or in-place (kubeadm upgrade)")
	cmd.Flags().IntVar(&f.pauseAfter, "pause-after", 0, "stop after this many control planes (0: all), holding the mixed window")
	f.images.add(cmd.Flags(), "to= or ")
	return cmd
}

func rollbackCommand() *cobra.Command {
	var f rolloutFlags
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Return every control plane to the version the last rollout started from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return move(cmd, f, func(ctx context.Context, c *cluster.Cluster, to version.Version, images *nodeimage.Resolver, r *rollout.Runner) error {
				return rollout.Rollback(ctx, c, rollout.RollbackInput{To: to, Images: images, Runner: r})
			})
		},
	}
	cmd.Flags().StringVarP(&f.name, "name", "n", defaultName("skewer-ha"), "cluster name ($SKEWER_CLUSTER_NAME sets the default)")
	cmd.Flags().Var(&f.to, "to", "version to return to (default: where the last rollout started)")
	f.images.add(cmd.Flags(), "to= or ")
	return cmd
}

// move runs a rollout or a rollback and says, whatever happens, which
// control plane runs what, and how to recover from a failure.
func move(cmd *cobra.Command, f rolloutFlags, do func(context.Context, *cluster.Cluster, version.Version, *nodeimage.Resolver, *rollout.Runner) error) error {
	ctx, out := cmd.Context(), cmd.ErrOrStderr()
	images, chosen, err := f.images.resolver(ctx, out, map[string]version.Version{"to": f.to})
	if err != nil {
		return badInput(err)
	}
	if f.to.IsZero() {
		f.to = chosen["to"]
	}
	if f.to.IsZero() && cmd.Name() == "rollout" {
		return badInput(fmt.Errorf("--to is required (e.g. --to v1.36.3)"))
	}
	c, err := cluster.Open(ctx, f.name, clusterOptions(out))
	if err != nil {
		return err
	}
	before, err := rollout.Census(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "control planes before:\n%s", rollout.Describe(before))
	start := time.Now()
	runner := &rollout.Runner{Out: out}
	err = do(ctx, c, f.to, images, runner)
	if len(runner.Steps) == 0 && err != nil {
		return err // refused: nothing changed, nothing to report
	}
	// A fresh context: the census after an interruption is what the user needs most.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if after, cerr := rollout.Census(actx, c); cerr == nil {
		fmt.Fprintf(out, "control planes after:\n%s", rollout.Describe(after))
	}
	if err != nil {
		return &hinted{err: err, hint: "recover with: skewer rollback --name " + f.name}
	}
	fmt.Fprintf(out, "done in %s\n", time.Since(start).Round(time.Second))
	return nil
}
