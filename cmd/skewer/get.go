package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// checkOutput refuses an --output other than text or json, before the
// command does anything.
func checkOutput(output string) error {
	if output == "text" || output == "json" {
		return nil
	}
	return badInput(fmt.Errorf("invalid --output %q: want text or json", output))
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printList prints rows as a table (text) or as a JSON array (json), the
// way every list of skewer's is printed.
func printList[T any](w io.Writer, output string, rows []T, header string, line func(T) string) error {
	if output == "json" {
		if rows == nil {
			rows = []T{}
		}
		return printJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, line(r))
	}
	return tw.Flush()
}

func getCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "List what is on this machine (clusters)",
		Args:  cobra.NoArgs,
	}
	var output string
	clusters := &cobra.Command{
		Use:   "clusters",
		Short: "List every kind cluster on this machine, and which ones skewer made",
		Long: `clusters lists every kind cluster on this machine (skewer's and others'): its name, its number
of nodes, whether skewer made it (its spec and kubeconfig are in skewer's state directory,
$SKEWER_STATE or ~/.cache/skewer/clusters) and that kubeconfig.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			list, err := cluster.List(clusterOptions(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			return printList(cmd.OutOrStdout(), output, list, "NAME\tNODES\tSKEWER\tKUBECONFIG", func(s cluster.Summary) string {
				made := "no"
				if s.Skewer {
					made = "yes"
				}
				return fmt.Sprintf("%s\t%d\t%s\t%s", s.Name, s.Nodes, made, s.Kubeconfig)
			})
		},
	}
	clusters.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.AddCommand(clusters)
	return cmd
}

func exportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export what a cluster leaves behind (logs)",
		Args:  cobra.NoArgs,
	}
	logs := &cobra.Command{
		Use:   "logs [NAME] DIR",
		Short: "Write a cluster's node logs (kind's export) and every apiserver's audit log under DIR",
		Long: `logs writes NAME's node logs (kind's export: journal, containers, kubelet, containerd) under
DIR/logs and every apiserver's audit log under DIR/audit. NAME defaults to $SKEWER_CLUSTER_NAME,
else skewer-ha.`,
		Example: `  skewer export logs skewer-ha /tmp/skewer-ha-logs
  SKEWER_CLUSTER_NAME=skewer-certify-surge skewer export logs ./logs`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, dir := defaultName("skewer-ha"), args[0]
			if len(args) == 2 {
				name, dir = args[0], args[1]
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			c, err := cluster.Open(cmd.Context(), name, clusterOptions(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			if err := c.ExportLogs(cmd.Context(), abs); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), abs)
			return nil
		},
	}
	cmd.AddCommand(logs)
	return cmd
}
