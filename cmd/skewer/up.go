package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/version"
)

type upFlags struct {
	profile, name, version     string
	cpVersions, workerVersions []string
	images                     givenFlags
	retain                     bool
}

func upCommand() *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create a cluster from a profile",
		Args:  cobra.NoArgs,
		Example: `  skewer up --profile ha --version v1.35.4
  skewer up --profile ha --version v1.35.4 --control-plane-versions v1.35.4,v1.35.4,v1.36.3
  skewer up --profile ha --version v1.36.3-acme.2 --kubernetes v1.36.3-acme.2=kubernetes-server-linux-amd64.tar.gz`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			spec, err := specFromFlags(f)
			if err != nil {
				return badInput(err)
			}
			r, _, err := f.images.resolver(cmd.Context(), cmd.ErrOrStderr(), nil)
			if err != nil {
				return badInput(err)
			}
			opts := clusterOptions(cmd.ErrOrStderr())
			opts.Retain = f.retain
			c, err := cluster.Create(cmd.Context(), spec, r.Resolve, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "cluster %q up in %s\n", c.Name, time.Since(start).Round(time.Second))
			fmt.Fprintf(cmd.OutOrStdout(), "export KUBECONFIG=%s\n", c.Kubeconfig())
			return nil
		},
	}
	cmd.Flags().StringVar(&f.profile, "profile", "ha", "profile name (clusters/<name>.yaml) or path")
	cmd.Flags().StringVarP(&f.name, "name", "n", defaultName(""), "cluster name (default: $SKEWER_CLUSTER_NAME, else the profile's)")
	cmd.Flags().StringVar(&f.version, "version", "", "Kubernetes version of every node (default: the profile's)")
	cmd.Flags().StringSliceVar(&f.cpVersions, "control-plane-versions", nil, "version of each control plane, in order")
	cmd.Flags().StringSliceVar(&f.workerVersions, "worker-versions", nil, "version of each worker, in order")
	f.images.add(cmd.Flags(), "")
	cmd.Flags().BoolVar(&f.retain, "retain", false, "keep the nodes of a failed create for debugging")
	return cmd
}

func specFromFlags(f upFlags) (*cluster.Spec, error) {
	path, err := cluster.FindProfile(f.profile)
	if err != nil {
		return nil, err
	}
	spec, err := cluster.LoadProfile(path)
	if err != nil {
		return nil, err
	}
	if f.name != "" {
		spec.Name = f.name
	}
	if f.version != "" {
		if spec.Version, err = version.Parse(f.version); err != nil {
			return nil, err
		}
	}
	if len(f.cpVersions) > 0 {
		if spec.ControlPlaneVersions, err = version.ParseList(f.cpVersions); err != nil {
			return nil, err
		}
	}
	if len(f.workerVersions) > 0 {
		if spec.WorkerVersions, err = version.ParseList(f.workerVersions); err != nil {
			return nil, err
		}
	}
	return spec, spec.Validate()
}

func downCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Delete a cluster: its containers, its network entries and its kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			deleted, state, err := cluster.Remove(cmd.Context(), name, clusterOptions(cmd.ErrOrStderr()))
			switch {
			case err != nil:
				return err
			case deleted:
				fmt.Fprintf(cmd.ErrOrStderr(), "cluster %q deleted in %s\n", name, time.Since(start).Round(100*time.Millisecond))
			case state:
				// What a failed create left: its state folder alone.
				fmt.Fprintf(cmd.ErrOrStderr(), "no cluster %q; removed the state folder it left\n", name)
			default:
				return fmt.Errorf("%w named %q", cluster.ErrNoCluster, name)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", defaultName("skewer-ha"), "cluster name ($SKEWER_CLUSTER_NAME sets the default)")
	return cmd
}
