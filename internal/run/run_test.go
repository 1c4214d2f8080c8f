package run

import (
	"context"
	"errors"
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
