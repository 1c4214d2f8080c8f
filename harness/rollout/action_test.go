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

// A worker's join has no controlPlane section; a control plane's
// advertises its own address. Each joins through the endpoint given.
func TestJoinConfiguration(t *testing.T) {
	cp := joinConfiguration("v1beta4", "c-external-load-balancer:6443", "c", "c-control-plane4", "172.18.0.9", "abc.def", true)
	worker := joinConfiguration("v1beta4", "c-control-plane:6443", "c", "c-worker2", "172.18.0.10", "abc.def", false)
	for _, want := range []string{"controlPlane:\n  localAPIEndpoint:\n    advertiseAddress: \"172.18.0.9\"\n    bindPort: 6443\n",
		`apiServerEndpoint: "c-external-load-balancer:6443"`, `value: "172.18.0.9"`} {
		if !strings.Contains(cp, want) {
			t.Errorf("a control plane's join lacks %q:\n%s", want, cp)
		}
	}
	if strings.Contains(worker, "controlPlane") || !strings.Contains(worker, `value: "kind://docker/c/c-worker2"`) ||
		!strings.Contains(worker, `apiServerEndpoint: "c-control-plane:6443"`) ||
		!strings.Contains(worker, "kind: JoinConfiguration\nnodeRegistration:") {
		t.Errorf("a worker's join:\n%s", worker)
	}
}
