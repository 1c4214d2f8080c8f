package rollout

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

func TestRunnerStopsAtTheFirstFailureAndNamesIt(t *testing.T) {
	var ran, phases []string
	step := func(name string, err error) Action {
		return Do(name, func(context.Context, *cluster.Cluster) error {
			ran = append(ran, name)
			return err
		})
	}
	var out bytes.Buffer
	r := &Runner{Out: &out, OnStep: func(_ context.Context, name string) { phases = append(phases, name) }}
	err := r.Run(context.Background(), nil, []Action{step("a", nil), step("b", errors.New("boom")), step("c", nil)})
	if err == nil || !strings.Contains(err.Error(), `step "b" failed: boom`) {
		t.Fatalf("err = %v", err)
	}
	if strings.Join(ran, ",") != "a,b" || strings.Join(phases, ",") != "a,b" {
		t.Errorf("ran %v, phases %v: want a,b for both", ran, phases)
	}
	if len(r.Steps) != 2 || r.Steps[1].Err == nil {
		t.Errorf("steps = %+v", r.Steps)
	}
	if !strings.Contains(out.String(), "✗ b") {
		t.Errorf("output lacks the failed step:\n%s", out.String())
	}
}

func TestRunnerDoesNothingOnceCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := (&Runner{}).Run(ctx, nil, []Action{Do("x", func(context.Context, *cluster.Cluster) error { called = true; return nil })})
	if err == nil || called {
		t.Fatalf("err %v, called %v: a cancelled run must not start a step", err, called)
	}
}
