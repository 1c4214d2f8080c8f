package rollout

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

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
	cp := joinConfiguration(joinSpec{apiVersion: "v1beta4", endpoint: "c-external-load-balancer:6443", cluster: "c", node: "c-control-plane4", ip: "172.18.0.9", token: "abc.def", controlPlane: true})
	worker := joinConfiguration(joinSpec{apiVersion: "v1beta4", endpoint: "c-control-plane:6443", cluster: "c", node: "c-worker2", ip: "172.18.0.10", token: "abc.def"})
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
	if strings.Contains(cp+worker, "taints") {
		t.Errorf("a join given no taints must leave them to kubeadm:\n%s\n%s", cp, worker)
	}
}

// A worker held out of scheduling registers with its taint, in
// kubeadm's nodeRegistration, as YAML kubeadm reads back.
func TestJoinConfigurationTaints(t *testing.T) {
	conf := joinConfiguration(joinSpec{apiVersion: "v1beta4", endpoint: "c-control-plane:6443", cluster: "c", node: "c-worker2", ip: "172.18.0.10", token: "abc.def",
		taints: []corev1.Taint{{Key: "skewer.io/held", Effect: corev1.TaintEffectNoSchedule}}})
	var got struct {
		NodeRegistration struct {
			CRISocket string         `json:"criSocket"`
			Taints    []corev1.Taint `json:"taints"`
		} `json:"nodeRegistration"`
	}
	if err := yaml.Unmarshal([]byte(conf), &got); err != nil {
		t.Fatalf("%v:\n%s", err, conf)
	}
	want := []corev1.Taint{{Key: "skewer.io/held", Effect: corev1.TaintEffectNoSchedule}}
	if !reflect.DeepEqual(got.NodeRegistration.Taints, want) || got.NodeRegistration.CRISocket == "" {
		t.Errorf("nodeRegistration %+v, want taints %+v beside the CRI socket:\n%s", got.NodeRegistration, want, conf)
	}
}

// guardFunc is a Guard of a function.
type guardFunc func(Step) error

func (g guardFunc) After(_ context.Context, done Step) error { return g(done) }

// The guard is asked after each step, once OnStep named the next (the
// traffic's phase for the step has ended), and after the last; a breach
// halts the rollout there, before anything else runs.
func TestRunnerHaltsWhereItsGuardSeesABreach(t *testing.T) {
	var trace []string
	step := func(name string) Action {
		return Do(name, func(context.Context, *cluster.Cluster) error { trace = append(trace, "run "+name); return nil })
	}
	r := &Runner{OnStep: func(_ context.Context, name string) { trace = append(trace, "phase "+name) },
		Guard: guardFunc(func(s Step) error {
			trace = append(trace, "guard "+s.Name)
			if s.Name == "join" {
				return errors.New("forwarded-failures is 4/6")
			}
			return nil
		})}
	err := r.Run(context.Background(), nil, []Action{step("set version"), step("join"), step("drain")})
	h, ok := AsHalted(err)
	if !ok || h.After != "join" || !strings.Contains(err.Error(), "forwarded-failures is 4/6") {
		t.Fatalf("got %v, want a halt after join naming the breach", err)
	}
	want := "phase set version, run set version, phase join, guard set version, run join, phase drain, guard join"
	if got := strings.Join(trace, ", "); got != want {
		t.Errorf("trace:\n%s\nwant\n%s", got, want)
	}
	// A quiet guard is asked after the last step too, and once per step
	// when a Runner runs two lists (a rollback's recovery, then its moves).
	trace = nil
	r = &Runner{Guard: guardFunc(func(s Step) error { trace = append(trace, s.Name); return nil })}
	for _, list := range [][]Action{{step("a")}, {step("b"), step("c")}} {
		if err := r.Run(context.Background(), nil, list); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(slices.DeleteFunc(trace, func(s string) bool { return strings.HasPrefix(s, "run ") }), " "); got != "a b c" {
		t.Errorf("the guard was asked after %q, want a b c", got)
	}
}
