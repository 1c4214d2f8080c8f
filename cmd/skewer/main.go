// Command skewer proves, on real kind clusters, that a control-plane rolling
// upgrade across a version skew and a migration to native sidecars are safe.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// SIGINT and SIGTERM cancel the context, so every command cleans up after
// itself.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses, as the CI systems that run skewer read them.
const (
	exitFailed      = 1   // a command failed, or a promise did
	exitBadInput    = 2   // the command line was refused; nothing was done
	exitInterrupted = 130 // Ctrl-C or SIGTERM; what was made is cleaned up
)

// Run runs the command line with the given output streams. An error is
// reported as one line on stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Until a command's own work starts, an error is cobra's refusal of
	// the command line (unknown command or flag, a flag's value, the
	// arguments): bad input.
	started := false
	root := &cobra.Command{
		Use:   "skewer",
		Short: "Prove Kubernetes control-plane upgrades and native sidecar migrations safe, on real kind clusters",
		Long: `skewer proves, on real kind clusters, that a control-plane rolling upgrade across a version skew
and a migration to native sidecars are safe. Every image a cluster runs is built on this machine from
the Go module proxy and Debian packages. Start with: skewer certify --from v1.35.4 --to v1.36.3`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			started = true
			if global.quiet {
				// Progress goes; results (stdout) and the error line stay.
				cmd.Root().SetErr(io.Discard)
			}
		},
	}
	root.SetFlagErrorFunc(flagError)
	pf := root.PersistentFlags()
	pf.IntVarP(&global.verbosity, "verbosity", "v", 0, "kind's log level: 0 its status lines, 1 and up its debug output too")
	pf.BoolVarP(&global.quiet, "quiet", "q", false, "print no progress, only results and errors")
	root.AddCommand(versionCommand(), imagesCommand(), upCommand(), downCommand(), getCommand(), exportCommand(), rolloutCommand(), rollbackCommand(), certifyCommand(), reportCommand())
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			var h *hinted
			if errors.As(err, &h) {
				fmt.Fprintf(stderr, "skewer: interrupted (%s)\n", h.hint)
			} else {
				fmt.Fprintln(stderr, "skewer: interrupted")
			}
			return exitInterrupted
		}
		fmt.Fprintln(stderr, "skewer:", err)
		var bad *badInputError
		if !started || errors.As(err, &bad) {
			return exitBadInput
		}
		return exitFailed
	}
	return 0
}

// flagError says what a good value looks like when a flag's value does not
// parse ("15" for a duration lacks its unit), rather than Go's parse error
// alone; the subcommands inherit it from the root.
func flagError(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return err
	}
	f := bad.GetFlag()
	want, ok := map[string]string{
		"duration": "a number with its unit, as 15s, 2m or 1m30s",
		"int":      "a whole number, as 2",
		"float64":  "a number, as 1 or 0.5",
		"bool":     "true or false",
	}[f.Value.Type()]
	if !ok {
		return err
	}
	return fmt.Errorf("--%s %q: want %s", f.Name, bad.GetValue(), want)
}

// badInputError is input a command refused before doing anything.
type badInputError struct{ err error }

func (b *badInputError) Error() string { return b.err.Error() }
func (b *badInputError) Unwrap() error { return b.err }

// badInput marks err, when there is one, as refused input (exit status 2).
func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &badInputError{err}
}

// global holds the root's flags, which every command reads.
var global struct {
	verbosity int
	quiet     bool
}

// clusterOptions are cluster.Options with the root's flags applied.
func clusterOptions(out io.Writer) cluster.Options {
	return cluster.Options{Out: out, Verbosity: global.verbosity}
}

// defaultName is the cluster name a command uses without --name:
// $SKEWER_CLUSTER_NAME (as kind reads KIND_CLUSTER_NAME), else fallback.
func defaultName(fallback string) string {
	if n := os.Getenv("SKEWER_CLUSTER_NAME"); n != "" {
		return n
	}
	return fallback
}

// hinted is an error with what the user can do about it.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return fmt.Sprintf("%v (%s)", h.err, h.hint) }
func (h *hinted) Unwrap() error { return h.err }
