package sidecarchecks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// CheckTermination judges, on every kubelet, sidecar.termination.reverse-order
// (with a grace period that leaves room for it, the app stops first, then
// the sidecars in reverse order of declaration, and the log agent ships
// every line) and sidecar.termination.bounded-flush (a flush cut short by
// a short grace period loses lines, counted from what reached the sink,
// and no container runs past the grace period).
func (s *Sidecars) CheckTermination(ctx context.Context) []promise.Verdict {
	return []promise.Verdict{
		s.onEach(ctx, "sidecar.termination.reverse-order", func(ctx context.Context, k Kubelet) ([]string, error) {
			return flushedAll(s.terminate(ctx, k, reverseOrderCase))
		}),
		s.onEach(ctx, "sidecar.termination.bounded-flush", func(ctx context.Context, k Kubelet) ([]string, error) {
			return lostSome(s.terminate(ctx, k, boundedFlushCase))
		}),
	}
}

// The termination checks' Pods: a grace period with room to flush every
// line, and one too short for the backlog.
var (
	reverseOrderCase = terminationCase{grace: 30, perLine: "1ms", budget: "10s", rate: "50", mustFlush: true}
	boundedFlushCase = terminationCase{grace: 6, perLine: "20ms", budget: "3s", rate: "400"}
)

// flushedAll judges sidecar.termination.reverse-order on how a Pod with
// time to flush stopped (stopped's line, lost, err): no line lost.
func flushedAll(line string, lost int, err error) ([]string, error) {
	if err == nil && lost != 0 {
		err = fmt.Errorf("%d lines lost with time to flush them: %s", lost, line)
	}
	return []string{line}, err
}

// lostSome judges sidecar.termination.bounded-flush on how a Pod whose
// backlog outgrows its flush budget stopped: some line lost, counted.
func lostSome(line string, lost int, err error) ([]string, error) {
	if err == nil && lost <= 0 {
		err = fmt.Errorf("a backlog larger than the flush budget lost no line: %s", line)
	}
	return []string{line}, err
}

type terminationCase struct {
	grace                 int64
	perLine, budget, rate string
	// mustFlush: the grace period leaves room for every sidecar to be told
	// to stop and to flush.
	mustFlush bool
}

// terminate runs an app with two native sidecars - a log agent, then a
// proxy - deletes the Pod, and says what each recorded and how many of
// the app's lines never reached the sink.
func (s *Sidecars) terminate(ctx context.Context, k Kubelet, tc terminationCase) (line string, lost int, err error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return "", 0, err
	}
	defer done()
	b := podBuilder{image: s.image, ns: ns, name: "terminate", node: k.Name}
	pods := s.cs.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, shippingPod(b, tc), metav1.CreateOptions{}); err != nil {
		return "", 0, err
	}
	if _, err := s.waitPod(ctx, "certify/sidecar-pod", ns, b.name, "Ready", podReady); err != nil {
		return "", 0, err
	}
	if err := waitShipping(ctx, k.Node, ns, b.name); err != nil {
		return "", 0, err
	}
	// A backlog to flush: the app writes meanwhile (not a wait for state).
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
		return "", 0, ctx.Err()
	}
	deleted := time.Now()
	if err := pods.Delete(ctx, b.name, metav1.DeleteOptions{}); err != nil {
		return "", 0, err
	}
	last, err := s.waitGoneSeen(ctx, ns, b.name, time.Duration(tc.grace+60)*time.Second)
	if err != nil {
		return "", 0, err
	}
	return stopped(ctx, k.Node, ns, b.name, tc, deleted, time.Since(deleted), lastEnded(last))
}

// shippingPod is an app writing lines to a file that a log agent, its
// first native sidecar, ships to a sink in the events directory; a proxy
// is its second.
func shippingPod(b podBuilder, tc terminationCase) *corev1.Pod {
	agent := native(b.container("log-agent", "log-agent", "-source", "/shared/app.log", "-sink", "/events/shipped",
		"-interval", "1s", "-per-line", tc.perLine, "-budget", tc.budget, "-report", "/events/agent.json"))
	proxy := native(b.container("proxy", "proxy", "-load-after", "0s"))
	app := b.container("app", "app", "-log", "/shared/app.log", "-rate", tc.rate)
	pod := b.pod([]corev1.Container{agent, proxy}, []corev1.Container{app})
	pod.Spec.TerminationGracePeriodSeconds = &tc.grace
	return pod
}

// waitShipping waits until a shippingPod's log agent on node has shipped
// a line.
func waitShipping(ctx context.Context, node cluster.Node, ns, pod string) error {
	return wait.For(ctx, "certify/sidecar-event", "the log agent shipping the app's lines", func(ctx context.Context) (bool, string, error) {
		n, err := shippedLines(ctx, node, ns, pod)
		return n > 0, fmt.Sprintf("%d lines shipped", n), err
	})
}

// shippedLines counts the lines a shippingPod's log agent on node has put
// in its sink.
func shippedLines(ctx context.Context, node cluster.Node, ns, pod string) (int, error) {
	return linesIn(ctx, node, sidecarEventsDir(ns, pod)+"/shipped")
}

// stopped judges how a shippingPod on node stopped, gone after it was
// deleted: SIGTERM to the app first, then to the sidecars in reverse
// order; how many of the app's lines never reached the sink.
func stopped(ctx context.Context, node cluster.Node, ns, pod string, tc terminationCase, deleted time.Time, gone time.Duration, ended time.Time) (line string, lost int, err error) {
	ev, err := events(ctx, node, ns, pod)
	if err != nil {
		return "", 0, err
	}
	return judgeStopped(ev, tc, deleted, gone, ended, func() (int, error) { return shippedLines(ctx, node, ns, pod) },
		func() (string, error) { return node.Run(ctx, "cat", sidecarEventsDir(ns, pod)+"/agent.json") })
}

// judgeStopped judges how a shippingPod of tc stopped, deleted at deleted
// and gone after gone, its last container ended at ended (zero: not
// seen), on what its fixtures recorded (ev), the lines its sink holds
// (sink) and the log agent's own report (report; an error when it
// wrote none), each read only once what comes before it held.
func judgeStopped(ev []fixtures.Event, tc terminationCase, deleted time.Time, gone time.Duration, ended time.Time, sink func() (int, error), report func() (string, error)) (line string, lost int, err error) {
	appStop, err := firstEvent(ev, "app", "sigterm")
	if err != nil {
		return "", 0, err
	}
	proxyStop, err := firstEvent(ev, "proxy", "sigterm")
	if err != nil {
		return "", 0, err
	}
	if !proxyStop.After(appStop) {
		return "", 0, fmt.Errorf("a sidecar was told to stop before the app: %s", eventLines(ev))
	}
	// With a short grace period the first sidecar may be killed without
	// ever being told to stop: said below, not failed.
	agentStop, agentTold := fixtures.First(ev, "log-agent", "sigterm")
	if (agentTold || tc.mustFlush) && !(agentTold && agentStop.After(proxyStop)) {
		return "", 0, fmt.Errorf("the sidecars did not stop in reverse order (the proxy, declared last, first; then the log agent): %s", eventLines(ev))
	}
	written := appWrote(ev)
	if written == 0 {
		return "", 0, fmt.Errorf("the app wrote no lines: %s", eventLines(ev))
	}
	// Counted here, from what reached the sink: the agent may be killed
	// before it can say what it lost.
	shipped, err := sink()
	if err != nil {
		return "", 0, err
	}
	lost = written - shipped
	if lost < 0 {
		return "", 0, fmt.Errorf("the sink holds %d lines, more than the %d the app wrote", shipped, written)
	}
	ran, err := withinGrace(ev, tc, appStop, agentStop, ended)
	if err != nil {
		return "", 0, err
	}
	noticed, held := killClock(deleted, gone, appStop)
	if bound := time.Duration(tc.grace)*time.Second + afterGrace; ended.IsZero() && held >= bound {
		return "", 0, fmt.Errorf("the Pod was gone %s after the kubelet's first SIGTERM (%s after the delete), not within its grace period of %ds (bound %s; its containers' end not seen in its status); what its containers saw: %s",
			held.Round(100*time.Millisecond), noticed.Round(100*time.Millisecond), tc.grace, bound, eventLines(ev))
	}
	reported := "killed before it could report (the Pod's grace period is shared, KEP-753)"
	if raw, err := report(); err == nil {
		var own fixtures.AgentReport
		if err := json.Unmarshal([]byte(raw), &own); err != nil {
			return "", 0, fmt.Errorf("the log agent's report: %w", err)
		}
		if own.Shipped != shipped || own.Shipped+own.Lost != own.Read {
			return "", 0, fmt.Errorf("the log agent's own report %+v disagrees with the sink's %d lines", own, shipped)
		}
		reported = fmt.Sprintf("its own report agrees (read %d, shipped %d, lost %d, flush %d ms)", own.Read, own.Shipped, own.Lost, own.FlushMillis)
	}
	agentTerm := "never (killed at the end of the grace period)"
	if agentTold {
		agentTerm = fmt.Sprintf("%s after the proxy, leaving it %s of the grace period",
			agentStop.Sub(proxyStop).Round(time.Millisecond), appStop.Add(time.Duration(tc.grace)*time.Second).Sub(agentStop).Round(100*time.Millisecond))
	}
	return fmt.Sprintf("grace %ds: SIGTERM to the app, to the proxy %s later, to the log agent %s; lines written %d, shipped %d, lost %d (counted from the sink); the log agent %s; %s; Pod gone %s after the first SIGTERM (%s after the delete)",
		tc.grace, proxyStop.Sub(appStop).Round(time.Millisecond), agentTerm, written, shipped, lost, reported, ran, held.Round(100*time.Millisecond), noticed.Round(100*time.Millisecond)), lost, nil
}

// stubbornGrace is the grace period of the Pod whose sidecar ignores
// SIGTERM: short, since the whole of it is spent.
const stubbornGrace = 5

// CheckSIGTERMIgnored judges sidecar.termination.sigterm-ignored on every
// kubelet: a Pod whose native sidecar ignores SIGTERM is held for its
// grace period and no longer (the kubelet's SIGKILL ends the sidecar; the
// Pod is gone within the bound), and the app, stopped first, kept every
// line it wrote.
func (s *Sidecars) CheckSIGTERMIgnored(ctx context.Context) promise.Verdict {
	return s.onEach(ctx, "sidecar.termination.sigterm-ignored", func(ctx context.Context, k Kubelet) ([]string, error) {
		line, err := s.stubborn(ctx, k)
		return []string{line}, err
	})
}

func (s *Sidecars) stubborn(ctx context.Context, k Kubelet) (string, error) {
	ns, done, err := s.namespace(ctx, nil)
	if err != nil {
		return "", err
	}
	defer done()
	b := podBuilder{image: s.image, ns: ns, name: "stubborn", node: k.Name}
	proxy := native(b.container("proxy", "proxy", "-load-after", "0s", "-ignore-sigterm"))
	// The app's lines go to the events directory: they outlive the Pod.
	app := b.container("app", "app", "-log", "/events/app.log", "-rate", "50")
	pod := b.pod([]corev1.Container{proxy}, []corev1.Container{app})
	grace := int64(stubbornGrace)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pods := s.cs.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := s.waitPod(ctx, "certify/sidecar-pod", ns, b.name, "Ready", podReady); err != nil {
		return "", err
	}
	deleted := time.Now()
	if err := pods.Delete(ctx, b.name, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	if err := s.waitGone(ctx, ns, b.name, stubbornGrace*time.Second+afterGrace+time.Minute); err != nil {
		return "", err
	}
	gone := time.Since(deleted)
	ev, err := events(ctx, k.Node, ns, b.name)
	if err != nil {
		return "", err
	}
	return judgeStubborn(ev, deleted, gone, func() (int, error) { return linesIn(ctx, k.Node, sidecarEventsDir(ns, b.name)+"/app.log") })
}

// judgeStubborn judges sidecar.termination.sigterm-ignored on what a Pod
// whose sidecar ignores SIGTERM left, deleted at deleted and gone after
// gone: its fixtures' events (ev) and the lines its app's file holds
// (kept, read once the rest held).
func judgeStubborn(ev []fixtures.Event, deleted time.Time, gone time.Duration, keptLines func() (int, error)) (string, error) {
	bound := stubbornGrace*time.Second + afterGrace
	appStop, err := firstEvent(ev, "app", "sigterm lines=")
	if err != nil {
		return "", err
	}
	ignored, err := firstEvent(ev, "proxy", "sigterm ignored")
	if err != nil {
		return "", err
	}
	if !ignored.After(appStop) {
		return "", fmt.Errorf("the sidecar was told to stop before the app: %s", eventLines(ev))
	}
	if _, exited := fixtures.First(ev, "proxy", "exit"); exited {
		return "", fmt.Errorf("the sidecar that ignores SIGTERM exited by itself: %s", eventLines(ev))
	}
	// Held for its grace period (the API's deletion is seen a moment
	// after the kill), and no longer than the bound, both counted from
	// the kubelet's first SIGTERM.
	noticed, held := killClock(deleted, gone, appStop)
	switch {
	case held < stubbornGrace*time.Second-time.Second:
		return "", fmt.Errorf("the Pod was gone %s after the kubelet's first SIGTERM, before its sidecar's grace period of %ds ran out: was it killed early? %s", held.Round(100*time.Millisecond), stubbornGrace, eventLines(ev))
	case held >= bound:
		return "", fmt.Errorf("the Pod was gone %s after the kubelet's first SIGTERM (%s after the delete), past the bound of %s (grace %ds + %s)",
			held.Round(100*time.Millisecond), noticed.Round(100*time.Millisecond), bound, stubbornGrace, afterGrace)
	}
	written := appWrote(ev)
	kept, err := keptLines()
	if err != nil {
		return "", err
	}
	if written == 0 || kept != written {
		return "", fmt.Errorf("the app said it wrote %d lines at SIGTERM; its file holds %d", written, kept)
	}
	return fmt.Sprintf("grace %ds: SIGTERM to the app %s after the delete, to the sidecar %s later (ignored); the Pod gone %s after the first SIGTERM, the kubelet's kill %s after the grace period ran out at most; the app's %d lines intact",
		stubbornGrace, noticed.Round(time.Millisecond), ignored.Sub(appStop).Round(time.Millisecond), held.Round(100*time.Millisecond),
		(held - stubbornGrace*time.Second).Round(100*time.Millisecond), kept), nil
}

// withinGrace judges when a shippingPod's last container ended (ended;
// zero: not seen), from the kubelet's first SIGTERM (appStop), against the
// grace period and the kill margin, and says it. The grace period bounds
// the containers' run, and the runtime recorded its end: what the Pod's
// object takes after that (the sandbox torn down, the volumes, the delete
// through a busy API) is not the flush's.
//
// The log agent's turn to stop comes once the proxy declared after it has
// stopped, or once the grace period has run out (kuberuntime's
// waitForTurn is bounded by it); from its SIGTERM (agentStop; zero: never
// told) it gets what is left of the grace period, at least the minimum
// grace. A turn reached past the grace period - the runtime slow to stop
// the proxy on a loaded node (1.75 s in a make e2e) - moves the bound with
// it, and must itself come within the kill margin of the grace period.
func withinGrace(ev []fixtures.Event, tc terminationCase, appStop, agentStop, ended time.Time) (string, error) {
	if ended.IsZero() {
		return "its containers' end not seen in its status", nil
	}
	took := ended.Sub(appStop)
	grace := time.Duration(tc.grace) * time.Second
	from, turn := grace, ""
	if told := agentStop.Sub(appStop); !agentStop.IsZero() && told > grace {
		if told >= grace+killMargin {
			return "", fmt.Errorf("the kubelet told the log agent to stop %s after its first SIGTERM, past the grace period of %ds and the kill margin of %s; what its containers saw: %s",
				told.Round(100*time.Millisecond), tc.grace, killMargin, eventLines(ev))
		}
		from, turn = told, fmt.Sprintf(", the log agent told %s after it", told.Round(100*time.Millisecond))
	}
	if bound := from + killMargin; took >= bound {
		return "", fmt.Errorf("the Pod's last container ended %s after the kubelet's first SIGTERM%s, not within its grace period of %ds (bound %s); what its containers saw: %s",
			took.Round(100*time.Millisecond), turn, tc.grace, bound, eventLines(ev))
	}
	return fmt.Sprintf("its last container ended %s after the first SIGTERM%s", took.Round(100*time.Millisecond), turn), nil
}

// killMargin is what a Pod's containers may run past its grace period:
// a sidecar told to stop when the grace period has run out still gets
// the kubelet's minimum grace, 2 s (kuberuntime's
// minimumGracePeriodInSeconds), and a second for its runtime to deliver
// SIGKILL and record the exit on a loaded node. The runtime's exit time
// reaches the API to the second, rounded down: no margin for that.
const killMargin = 3 * time.Second

// afterGrace is what a Pod may take past its grace period to be gone: for
// its kubelet to see the containers it killed dead (PLEG relists every
// second), tear down the Pod's volumes and sandbox, and delete the object
// through the API.
const afterGrace = 15 * time.Second

// killClock splits a Pod's deletion (deleted at deleted, gone after gone)
// at the kubelet's first SIGTERM (its app's, at firstTerm): how long the
// kubelet took to notice the delete, and how long the Pod was held from
// there. The kubelet counts the grace period from when it starts killing,
// not from the API's delete; how soon it notices is its sync loop under
// the machine's load (6.6 s on the old worker of a certify run, with four
// checks' Pods and a join beside it) and says nothing of the grace period
// or the flush. Without a delete time (zero) the whole is counted as held.
func killClock(deleted time.Time, gone time.Duration, firstTerm time.Time) (noticed, held time.Duration) {
	if deleted.IsZero() || firstTerm.Before(deleted) {
		return 0, gone
	}
	noticed = firstTerm.Sub(deleted)
	return noticed, gone - noticed
}

// linesIn counts the lines of a file in k's node; a file not there yet
// has none.
func linesIn(ctx context.Context, node cluster.Node, path string) (int, error) {
	out, err := node.Run(ctx, "sh", "-c", `cat "$1" 2>/dev/null | wc -l`, "sh", path)
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscanf(strings.TrimSpace(out), "%d", &n)
	return n, err
}

// appWrote is how many lines the app said it had written when told to
// stop (its "sigterm lines=N" event); 0 when it never said.
func appWrote(ev []fixtures.Event) int {
	var n int
	for _, e := range ev {
		if e.Who == "app" && strings.HasPrefix(e.What, "sigterm lines=") {
			fmt.Sscanf(e.What, "sigterm lines=%d", &n)
		}
	}
	return n
}
