package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
)

func reportCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report DIR",
		Short: "Render junit.xml, summary.md and report.html again from DIR/results.json alone",
		Long: `report reads DIR/results.json (a certification's results, checked against their schema,
harness/report/results.schema.json) and writes junit.xml, summary.md and report.html from it, in DIR
or in --out: what a certification publishes, made again by the skewer that reads it, with nothing
but the results. The exit status is 1 when a promise failed, as certify's.`,
		Example: `  skewer report skewer-results
  skewer report downloaded-artifact/results --out /tmp/rendered`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := report.Load(filepath.Join(args[0], report.ResultsFile))
			if err != nil {
				return badInput(err)
			}
			if out == "" {
				out = args[0]
			}
			if err := res.Write(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", res.Summary())
			fmt.Fprintf(cmd.ErrOrStderr(), "rendered in %s (junit.xml, summary.md, report.html)\n", out)
			if n := res.Counts()[promise.Fail]; n > 0 {
				return fmt.Errorf("%d promise(s) failed", n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the files (default: DIR)")
	cmd.AddCommand(mergeCommand(), soakCommand())
	return cmd
}

func soakCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "soak DIR...",
		Short: "Add up certifications of one pair run back to back (make soak): each promise's outcomes, each run's time",
		Long: `soak reads DIR/results.json of each certification of a soak - the same pair certified again and
again on one machine (make soak N=10) - and prints, in Markdown, each certification's outcome and
time, then every promise that came out differently between runs or failed in one (a flake: find
its cause; a soak never retries one into a pass), with how often it passed, was waived, failed or
could not be judged, and the reasons it failed; then the promises that came out the same in every
run. A certification cut short, or lacking a run, counts against the soak. The exit status is 1
when any certification did not pass.`,
		Example: `  skewer report soak _artifacts/soak/run-*`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs, err := loadResults(args)
			if err != nil {
				return badInput(err)
			}
			s, err := report.NewSoak(args, runs)
			if err != nil {
				return badInput(err)
			}
			fmt.Fprint(cmd.OutOrStdout(), s.Markdown())
			if !s.Passed() {
				return fmt.Errorf("%d certification(s) of %d did not pass", s.Failed(), len(s.Runs))
			}
			return nil
		},
	}
}

func mergeCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge DIR... --out DIR",
		Short: "Join the results of a certification's shards (certify --shard) into one",
		Long: `merge reads DIR/results.json of each shard of one certification - the same pair, skewer build,
node images, budget and strictness, split across machines with certify --shard - and writes the
whole certification's results.json, junit.xml, summary.md and report.html in --out: every shard's
runs, the coverage and the outcome counted over all of them. A promise no shard judged stays
unjudged and the coverage says so; a shard cut short makes the whole incomplete. Results that are
not shards of one certification are refused and nothing is written. The exit status is 1 when a
promise failed, as certify's.`,
		Example: `  skewer report merge shard-proxy shard-rollout shard-sidecar --out results`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return badInput(errors.New("--out: where to write the merged results is required"))
			}
			shards, err := loadResults(args)
			if err != nil {
				return badInput(err)
			}
			res, err := report.Merge(shards...)
			if err != nil {
				return badInput(err)
			}
			if err := writableDir(out); err != nil {
				return badInput(fmt.Errorf("--out: %w", err))
			}
			if err := res.Write(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d shard(s) merged in %s (results.json, junit.xml, summary.md, report.html)\n", len(args), out)
			fmt.Fprintln(cmd.OutOrStdout(), res.Headline())
			if res.Outcome != promise.Pass {
				c := res.Counts()
				return fmt.Errorf("certification of %s -> %s: %s, %d promise(s) failed, %d could not be judged", res.From, res.To, res.Outcome, c[promise.Fail], c[promise.Error])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the merged results (required)")
	return cmd
}

// loadResults reads DIR/results.json of each of dirs, in order.
func loadResults(dirs []string) ([]*report.Results, error) {
	var all []*report.Results
	for _, dir := range dirs {
		res, err := report.Load(filepath.Join(dir, report.ResultsFile))
		if err != nil {
			return nil, err
		}
		all = append(all, res)
	}
	return all, nil
}
