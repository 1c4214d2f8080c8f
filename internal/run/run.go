// Package run executes commands as argv lists under a context and keeps
// their output for the error when they fail. Every host program skewer
// runs (go build, debootstrap, docker) goes through it.
//
// It stands on os/exec rather than on github.com/vladimirvivien/gexe (the
// exec layer e2e-framework uses) because gexe v0.5.0 takes a command only as
// one string that its own parser splits again: it has no argv entry point,
// so an argument that holds a quote, a space or a '$' (a docker --format
// template, a path, a JSON patch) is not passed as given. That is shown by
// TestGexeSplitsArgumentsAgain. gexe does cancel by context and can hand
// out its *exec.Cmd; it is the splitting that rules it out.
package run

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Error is a failed command with the output it produced.
type Error struct {
	Args   []string
	Output []byte
	Err    error
}

func (e *Error) Error() string {
	out := strings.TrimSpace(string(e.Output))
	if len(out) > 4000 {
		out = "..." + out[len(out)-4000:]
	}
	if out == "" {
		return fmt.Sprintf("command %q failed: %v", strings.Join(e.Args, " "), e.Err)
	}
	return fmt.Sprintf("command %q failed: %v: %s", strings.Join(e.Args, " "), e.Err, out)
}

func (e *Error) Unwrap() error { return e.Err }

// Cmd is one command to run.
type Cmd struct {
	Args  []string
	Dir   string
	Env   []string // added to the process environment
	Stdin io.Reader
	// Log, when set, receives the combined output as it is produced,
	// from one goroutine at a time.
	Log io.Writer
}

// Command returns a Cmd for argv.
func Command(args ...string) *Cmd { return &Cmd{Args: args} }

// Output runs the command and returns its standard output. On failure the
// error carries stdout and stderr.
func (c *Cmd) Output(ctx context.Context) ([]byte, error) {
	var stdout, combined bytes.Buffer
	cmd := c.build(ctx)
	// os/exec copies stdout and stderr in two goroutines: what both write
	// to is written under one lock.
	both := &lockedWriter{w: &combined}
	if c.Log != nil {
		both.w = io.MultiWriter(&combined, c.Log)
	}
	cmd.Stdout = io.MultiWriter(&stdout, both)
	cmd.Stderr = both
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.Bytes(), &Error{Args: c.Args, Output: combined.Bytes(), Err: err}
	}
	return stdout.Bytes(), nil
}

// Stream runs the command with its standard output going to w as it is
// produced and kept nowhere else: for a follower that runs for long. A
// failure carries its standard error.
func (c *Cmd) Stream(ctx context.Context, w io.Writer) error {
	var stderr bytes.Buffer
	cmd := c.build(ctx)
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return &Error{Args: c.Args, Output: stderr.Bytes(), Err: err}
	}
	return nil
}

// Run runs the command, discarding its output unless it fails.
func (c *Cmd) Run(ctx context.Context) error {
	_, err := c.Output(ctx)
	return err
}

// String runs the command and returns its trimmed standard output.
func (c *Cmd) String(ctx context.Context) (string, error) {
	out, err := c.Output(ctx)
	return strings.TrimSpace(string(out)), err
}

// stopGrace is how long a cancelled command has, once its process group
// was sent SIGTERM, before its leader is killed and its output closed.
const stopGrace = 10 * time.Second

func (c *Cmd) build(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	// Its own process group, ended whole on a cancel: what the command
	// started (debootstrap's tar and wget, a shell's children) stops with
	// it instead of writing on after skewer has gone, and sudo relays the
	// signal to the command it runs as root. The leader alone, killed,
	// left them running - and holding its output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = stopGrace
	cmd.Dir = c.Dir
	cmd.Stdin = c.Stdin
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	return cmd
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
