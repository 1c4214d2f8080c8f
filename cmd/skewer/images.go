package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/source"
)

func imagesCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "images", Short: "Build and list node images (offline, from the Go module proxy and Debian)"}
	var versions, releases []string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the node image of each --version and --kubernetes release, reusing every cached input",
		Example: `  skewer images build --version v1.35.4,v1.36.3
  skewer images build --kubernetes ./kubernetes-server-linux-amd64.tar.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(versions)+len(releases) == 0 {
				return badInput(fmt.Errorf("--version or --kubernetes is required (e.g. --version v1.36.3)"))
			}
			vs, err := version.ParseList(versions)
			if err != nil {
				return badInput(err)
			}
			// Every input is checked before the first is built.
			r := &nodeimage.Resolver{Source: nodeimage.SourceBuild, Out: cmd.ErrOrStderr()}
			for _, v := range vs {
				if err := r.Check(cmd.Context(), v); err != nil {
					return badInput(err)
				}
			}
			var rels []*nodeimage.Release
			for _, path := range releases {
				rel, err := nodeimage.OpenRelease(cmd.Context(), path, source.CacheDir())
				if err != nil {
					return badInput(fmt.Errorf("--kubernetes %s: %w", path, err))
				}
				rels = append(rels, rel)
			}
			b := &nodeimage.Builder{Out: cmd.ErrOrStderr()}
			for _, v := range vs {
				ref, err := b.Build(cmd.Context(), v)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), ref)
			}
			for _, rel := range rels {
				art, err := b.BuildRelease(cmd.Context(), rel)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), art.NodeImage)
			}
			return nil
		},
	}
	build.Flags().StringSliceVar(&versions, "version", nil, "Kubernetes version(s) to build from the Go module proxy, e.g. v1.35.4,v1.36.3")
	build.Flags().StringSliceVar(&releases, "kubernetes", nil, "Kubernetes build(s) of your own to make node images of: a server release tarball, a directory of its binaries, or a source tree")
	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the images skewer built on this machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			images, err := docker.Images(cmd.Context(), nodeimage.LocalBuildLabel)
			if err != nil {
				return err
			}
			return printList(cmd.OutOrStdout(), output, images, "IMAGE\tID\tSIZE\tCREATED", func(i docker.Image) string {
				return strings.Join([]string{i.Ref, i.ID, i.Size, i.Created}, "\t")
			})
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	var dryRun bool
	clean := &cobra.Command{
		Use:   "clean",
		Short: "Remove every image skewer made on this machine, and nothing else",
		Long: `clean removes every image that carries skewer's label (` + nodeimage.LocalBuildLabel + `): node images, component
and fixture images, root filesystems, and the load-balancer stand-in built under Envoy's name when
this machine had no Envoy. Images skewer did not make are left alone, including a real Envoy.
The build cache (~/.cache/skewer) stays; the next build reuses it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gone, err := docker.RemoveImages(cmd.Context(), nodeimage.LocalBuildLabel, dryRun)
			for _, ref := range gone {
				fmt.Fprintln(cmd.OutOrStdout(), ref)
			}
			if err == nil {
				verb := "removed"
				if dryRun {
					verb = "would remove"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s %d image(s)\n", verb, len(gone))
			}
			return err
		},
	}
	clean.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed; remove nothing")
	cmd.AddCommand(build, list, clean)
	return cmd
}
