package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/skewer-k8s/skewer/fixtures"
)

// TestTermination: on deletion the app stops first, then the sidecars in
// reverse order of declaration; the log agent flushes within the grace
// period, and what a flush cut short loses is counted.
func TestTermination(t *testing.T) {
	f := features.New("termination").WithLabel("area", "sidecar").
		Assess("the app stops first, then the sidecars in reverse order; the agent flushes everything", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, w := range workers(ctx, t) {
				rep := terminate(ctx, t, w, terminationCase{grace: 30, perLine: "1ms", budget: "10s", rate: "50", mustFlush: true})
				NewWithT(t).Expect(rep.Lost).To(BeZero(), "lines lost with time to flush them")
			}
			return ctx
		}).
		Assess("a flush cut short by a short grace period counts its lost lines and does not hold the Pod", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			for _, w := range workers(ctx, t) {
				rep := terminate(ctx, t, w, terminationCase{grace: 6, perLine: "20ms", budget: "3s", rate: "400"})
				NewWithT(t).Expect(rep.Lost).To(BeNumerically(">", 0), "a backlog larger than the budget loses lines")
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

type terminationCase struct {
	grace                 int64
	perLine, budget, rate string
	// mustFlush: the grace period leaves room for every sidecar to be told
	// to stop and to flush.
	mustFlush bool
}

// terminate runs an app with two native sidecars - a log agent, then a
// proxy - deletes the Pod and reads what each recorded.
func terminate(ctx context.Context, t *testing.T, w worker, tc terminationCase) fixtures.AgentReport {
	g := NewWithT(t)
	ns := namespace(ctx, t, nil)
	b := podBuilder{image: fixtureImage(ctx, t), ns: ns, name: "terminate", node: w.Name}
	agent := native(b.container("log-agent", "log-agent", "-source", "/shared/app.log", "-sink", "/events/shipped",
		"-interval", "1s", "-per-line", tc.perLine, "-budget", tc.budget, "-report", "/events/agent.json"))
	proxy := native(b.container("proxy", "proxy", "-load-after", "0s"))
	app := b.container("app", "app", "-log", "/shared/app.log", "-rate", tc.rate)
	pod := b.pod([]corev1.Container{agent, proxy}, []corev1.Container{app})
	pod.Spec.TerminationGracePeriodSeconds = &tc.grace
	_, err := client(t).CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	waitPod(ctx, t, ns, b.name, 2*time.Minute, "Ready", podReady)
	// Let the app write for a few seconds (the agent falls behind at 20ms a line).
	g.Eventually(func() string {
		out, _ := w.Run(ctx, "sh", "-c", "wc -l < "+eventsDir(ns, b.name)+"/shipped")
		return strings.TrimSpace(out)
	}).WithTimeout(30 * time.Second).WithPolling(time.Second).ShouldNot(Or(BeEmpty(), Equal("0")))
	time.Sleep(3 * time.Second) // a backlog to flush: the app writes meanwhile (not a wait for state)
	g.Expect(client(t).CoreV1().Pods(ns).Delete(ctx, b.name, metav1.DeleteOptions{})).To(Succeed())
	gone := waitGone(ctx, t, ns, b.name, time.Duration(tc.grace+60)*time.Second)
	ev := readEvents(ctx, t, w.Node, ns, b.name)
	logEvents(t, fmt.Sprintf("%s (kubelet %s), grace %ds", w.Name, w.Version, tc.grace), ev)

	appStop, ok := fixtures.First(ev, "app", "sigterm")
	g.Expect(ok).To(BeTrue(), "the app got SIGTERM")
	proxyStop, ok := fixtures.First(ev, "proxy", "sigterm")
	g.Expect(ok).To(BeTrue(), "the proxy got SIGTERM")
	g.Expect(proxyStop).To(BeTemporally(">", appStop), "the sidecars stop after the app")
	// With a short grace period the first sidecar may be killed without
	// ever being told to stop: reported below, not failed.
	agentStop, agentTold := fixtures.First(ev, "log-agent", "sigterm")
	if agentTold || tc.mustFlush {
		g.Expect(agentTold).To(BeTrue(), "the log agent got SIGTERM")
		g.Expect(agentStop).To(BeTemporally(">", proxyStop), "the sidecars stop in reverse order: the proxy (declared last) first")
	}

	var written int
	for _, e := range ev {
		if e.Who == "app" && strings.HasPrefix(e.What, "sigterm lines=") {
			fmt.Sscanf(e.What, "sigterm lines=%d", &written)
		}
	}
	g.Expect(written).To(BeNumerically(">", 0), "the app wrote lines")
	// Counted here, from what reached the sink: the agent may be killed
	// before it can say what it lost.
	out, err := w.Run(ctx, "sh", "-c", "wc -l < "+eventsDir(ns, b.name)+"/shipped")
	g.Expect(err).NotTo(HaveOccurred())
	var shipped int
	fmt.Sscanf(strings.TrimSpace(out), "%d", &shipped)
	rep := fixtures.AgentReport{Read: written, Shipped: shipped, Lost: written - shipped}
	g.Expect(rep.Lost).To(BeNumerically(">=", 0), "the sink holds no more than the app wrote")
	g.Expect(gone).To(BeNumerically("<", time.Duration(tc.grace)*time.Second+15*time.Second), "the Pod is gone within its grace period")
	agentExit, reported := fixtures.First(ev, "log-agent", "exit")
	graceEnd := appStop.Add(time.Duration(tc.grace) * time.Second)
	if raw, err := w.Run(ctx, "cat", eventsDir(ns, b.name)+"/agent.json"); err == nil {
		var own fixtures.AgentReport
		g.Expect(json.Unmarshal([]byte(raw), &own)).To(Succeed())
		g.Expect(own.Shipped).To(Equal(shipped), "the agent's own count of what it shipped")
		g.Expect(own.Shipped + own.Lost).To(Equal(own.Read))
		rep.FlushMillis = own.FlushMillis
	}
	agentTerm := "never (killed at the end of the grace period)"
	if agentTold {
		agentTerm = fmt.Sprintf("%s after the proxy, leaving it %s of the grace period",
			agentStop.Sub(proxyStop).Round(time.Millisecond), graceEnd.Sub(agentStop).Round(100*time.Millisecond))
	}
	s.Measured(t, "%s (kubelet %s), grace %ds: SIGTERM to the app, to the proxy %s later, to the log agent %s; lines written %d, shipped %d, lost %d (counted from the sink); agent's own report: %v; Pod gone %s after the delete",
		w.Name, w.Version, tc.grace, proxyStop.Sub(appStop).Round(time.Millisecond), agentTerm,
		written, shipped, rep.Lost, reported && !agentExit.IsZero(), gone.Round(100*time.Millisecond))
	// Killed before it could report is what KEP-753 says of a grace period
	// the sidecars share; what it lost is counted from the sink above all the same.
	if !reported {
		s.Measured(t, "%s (kubelet %s), grace %ds: the log agent (declared first, stopped last) was told to stop %s and was killed before it could report (the Pod's grace period is shared, KEP-753)",
			w.Name, w.Version, tc.grace, agentTerm)
	}
	return rep
}
