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
)

// SIGINT and SIGTERM cancel the context, so every command cleans up after
// itself.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs the command line with the given output streams. An error is
// reported as one line on stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "skewer",
		Short:         "Prove Kubernetes control-plane upgrades and native sidecar migrations safe, on real kind clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(imagesCommand(), upCommand(), downCommand(), rolloutCommand(), rollbackCommand(), certifyCommand())
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
			return 130
		}
		fmt.Fprintln(stderr, "skewer:", err)
		return 1
	}
	return 0
}

// hinted is an error with what the user can do about it.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return fmt.Sprintf("%v (%s)", h.err, h.hint) }
func (h *hinted) Unwrap() error { return h.err }
