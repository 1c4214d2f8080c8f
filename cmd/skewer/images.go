package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
)

func imagesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "images", Short: "Build and list node images (offline, from the Go module proxy and Debian)"}
	var versions []string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the node image of each --version, reusing every cached input",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(versions) == 0 {
				return fmt.Errorf("--version is required (e.g. --version v1.36.3)")
			}
			vs, err := version.ParseList(versions)
			if err != nil {
				return err
			}
			b := &nodeimage.Builder{Out: cmd.ErrOrStderr()}
			for _, v := range vs {
				ref, err := b.Build(cmd.Context(), v)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), ref)
			}
			return nil
		},
	}
	build.Flags().StringSliceVar(&versions, "version", nil, "Kubernetes version(s) to build, e.g. v1.35.4,v1.36.3")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the images skewer built on this machine",
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows, err := docker.Images(cmd.Context(), nodeimage.LocalBuildLabel)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "IMAGE\tSIZE\tCREATED")
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(rows, "\n"))
			return nil
		},
	}
	cmd.AddCommand(build, list)
	return cmd
}
