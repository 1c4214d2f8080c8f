package run

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	gexe "github.com/vladimirvivien/gexe/exec"
)

// An argument that carries quotes, as docker's --format templates do,
// reaches the program exactly as given.
func TestArgumentsArePassedAsGiven(t *testing.T) {
	arg := `{{index .Config.Labels "io.skewer.key"}} it's $HOME`
	out, err := Command("printf", "%s", arg).String(context.Background())
	if err != nil || out != arg {
		t.Fatalf("printf %%s %q = %q, %v", arg, out, err)
	}
}

// Why this package does not run commands through gexe: it splits its one
// command string with its own parser, so the same argument comes out
// changed.
func TestGexeSplitsArgumentsAgain(t *testing.T) {
	arg := `{{index .Config.Labels "io.skewer.key"}}`
	words, err := gexe.Parse("docker image inspect --format " + arg + " ref")
	if err != nil {
		t.Fatal(err)
	}
	if len(words) == 5 && words[3] == arg {
		t.Fatalf("gexe kept %q whole (%q): it may now serve as the exec layer", arg, words)
	}
	t.Logf("gexe turned %q into %q", arg, words[3:len(words)-1])
}

func TestFailureKeepsOutputAndCancelStops(t *testing.T) {
	err := Command("sh", "-c", "echo visible-output; exit 3").Run(context.Background())
	var re *Error
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "visible-output") {
		t.Fatalf("err = %v: want a *run.Error carrying the output", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = Command("sleep", "10").Run(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled sleep: %v after %s", err, time.Since(start))
	}
}

// A cancelled command ends with everything it started: a shell's child
// is in its process group and gets the signal too, so the command
// returns at once instead of when the child would have ended.
func TestCancelEndsTheProcessGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Command("sh", "-c", "sleep 60 & echo $!; wait").Stream(ctx, w)
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the child's pid: %q", line)
	}
	go io.Copy(io.Discard, r)
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(stopGrace / 2):
		t.Fatalf("the cancelled command still runs after %s: its child holds it", time.Since(start))
	}
	for deadline := time.Now().Add(5 * time.Second); running(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d still runs after the cancel", pid)
		}
	}
}

// running says whether process pid runs (gone or a zombie: it does not).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z")
}
