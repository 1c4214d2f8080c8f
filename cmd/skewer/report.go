package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/certify"
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
			if n := res.Counts()[certify.Fail]; n > 0 {
				return fmt.Errorf("%d promise(s) failed", n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the files (default: DIR)")
	return cmd
}
