package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
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
	before, err := rollout.NodeVersions(ctx, c)
	if err != nil {
		return err
	}
	printVersions(out, "before", before)
	var actions []rollout.Action
	if f.strategy == "in-place" {
		v, _ := nodeimage.ParseVersion(to)
		art, err := (&nodeimage.Builder{Out: out}).Artifacts(ctx, v)
		if err != nil {
			return err
		}
		actions, err = rollout.InPlace(ctx, c, rollout.InPlaceInput{To: to, PauseAfter: f.pauseAfter, Artifacts: art})
		if err != nil {
			return err
		}
	} else {
		actions, err = rollout.Surge(ctx, c, rollout.SurgeInput{To: to, PauseAfter: f.pauseAfter, AllowDowngrade: rollback})
		if err != nil {
			return err
		}
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
			rec = record{From: from, To: to, Strategy: f.strategy}
		}
		raw, _ := json.Marshal(rec)
		if err := os.WriteFile(recordPath(c), raw, 0o644); err != nil {
			return err
		}
	}
	start := time.Now()
	runner := &rollout.Runner{Out: out}
	runErr := runner.Run(ctx, c, actions)
	// Whatever happened, say exactly which node runs what.
	vctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if after, err := rollout.NodeVersions(vctx, c); err == nil {
		printVersions(out, "after", after)
	}
	if runErr != nil {
		return fmt.Errorf("%w (recover with: skewer rollback --name %s)", runErr, f.name)
	}
	if rollback {
		_ = os.Remove(recordPath(c))
	}
	fmt.Fprintf(out, "done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

func printVersions(w io.Writer, when string, versions map[string]string) {
	names := make([]string, 0, len(versions))
	for n := range versions {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "control planes %s:\n", when)
	for _, n := range names {
		fmt.Fprintf(w, "  %-40s %s\n", n, versions[n])
	}
}
