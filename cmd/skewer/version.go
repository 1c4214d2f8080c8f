package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/report"
)

func versionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print skewer's version, the commit it was built from, and the kind and Go it links",
		Long: `version prints skewer's module version ((devel) for a build from a checkout), the VCS commit
it was built from (+dirty when the tree had changes), and the versions of kind's library and of Go
it was built with: what results.json records as the tool of a certification.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			t := toolInfo()
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), t)
			}
			commit := t.Commit
			if commit == "" {
				commit = "unknown"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "skewer %s (commit %s) kind %s %s\n", t.Version, commit, t.Kind, t.Go)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// releaseVersion is the release a binary was built as (`make release` sets it);
// empty for go install and go build, whose module version says it.
var releaseVersion string

// toolInfo is skewer's version (its release, else its module version), the
// commit it was built from, and what it was built with.
func toolInfo() report.Tool {
	t := report.Tool{Version: "(devel)", Go: runtime.Version(), Kind: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if ok && bi.Main.Version != "" {
		t.Version = bi.Main.Version
	}
	if releaseVersion != "" {
		t.Version = releaseVersion
	}
	if !ok {
		return t
	}
	for _, d := range bi.Deps {
		if d.Path == "sigs.k8s.io/kind" {
			t.Kind = d.Version
		}
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			t.Commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if t.Commit != "" && dirty {
		t.Commit += "+dirty"
	}
	return t
}
