package sidecarchecks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// The logged Pod: an app that answers on its Pod's address and writes a
// numbered access-log line for each request, and an optional log agent
// as its native sidecar, without a readiness probe, that ships the log
// every agentInterval and keeps its position in a file of the Pod's. The
// agent crashes once it has shipped shippedBeforeCrash lines - requests
// the client Pod made, however late it started - with the rest of its
// batch unshipped. Once the client is done, the agent has shipCatchUp to
// ship what is left (a few hundred lines at 5 ms a line).
const (
	shippedBeforeCrash = 20
	agentInterval      = 200 * time.Millisecond
	shipCatchUp        = 15 * time.Second
)

// CheckFailOpen judges sidecar.failure.open on every kubelet at once: an
// optional helper that crashes costs the app nothing. The app runs on,
// never restarted, and answers a client Pod at its own address through
// the helper's outage; the helper, started again, goes on from its
// position, and every line the app wrote is shipped - what was lost or
// shipped twice is counted, and fails it. Through the Service, the
// outage's attempts are measured, not judged: a native sidecar's
// readiness is the Pod's, so a restarting helper may take the Pod out of
// the Service's endpoints for a moment.
func (s *Sidecars) CheckFailOpen(ctx context.Context) promise.Verdict {
	return s.onEachAtOnce(ctx, "sidecar.failure.open", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		b := podBuilder{image: s.image, ns: ns, name: "logged", node: k.Name}
		agent := native(b.container(CrashingAgent, "log-agent", "-source", "/events/app.log", "-sink", "/events/shipped",
			"-interval", agentInterval.String(), "-positions", "/shared/positions", "-crash-after-lines", strconv.Itoa(shippedBeforeCrash), "-crash-marker", "/shared/crashed"))
		app := b.container("app", "app", "-serve", ":8080", "-log", "/events/app.log", "-access-log")
		p, clusterIP, err := s.servedPod(ctx, b.pod([]corev1.Container{agent}, []corev1.Container{app}))
		if err != nil {
			return nil, err
		}
		urls := OpenURLs{Service: "http://" + clusterIP + ":8080/", App: "http://" + p.Status.PodIP + ":8080/"}
		if err := s.runClient(ctx, ns, k.Name, urls.Service, urls.App); err != nil {
			return nil, err
		}
		var seen OpenSeen
		if seen.Pod, err = s.cs.CoreV1().Pods(ns).Get(ctx, b.name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
		if seen.Log, seen.Shipped, err = s.caughtUp(ctx, k.Node, sidecarEventsDir(ns, b.name)); err != nil {
			return nil, err
		}
		if seen.Events, err = withClient(ctx, k.Node, ns, b.name); err != nil {
			return nil, err
		}
		return judgeFailOpen(urls, seen)
	})
}

// OpenURLs are what the client Pod asks of the logged Pod: its Service
// and the app's own address.
type OpenURLs struct{ Service, App string }

// OpenSeen is what CheckFailOpen read of the logged Pod: the fixtures'
// and the client's events, the Pod, the app's access log and what the
// agent shipped of it.
type OpenSeen struct {
	Events       []fixtures.Event
	Pod          *corev1.Pod
	Log, Shipped string
}

// caughtUp reads the app's access log and what the agent shipped, in the
// logged Pod's folder dir on node, once every line is shipped or
// shipCatchUp has passed: the client is done, so the log no longer grows.
func (s *Sidecars) caughtUp(ctx context.Context, node cluster.Node, dir string) (log, shipped string, err error) {
	budget := wait.Budget{Timeout: shipCatchUp, Interval: 500 * time.Millisecond}
	werr := wait.Within(ctx, budget, "the log agent shipping the app's access log", func(ctx context.Context) (bool, string, error) {
		l, err := node.ReadFile(ctx, dir+"/app.log")
		if err != nil {
			return false, err.Error(), nil
		}
		sh, err := node.ReadFile(ctx, dir+"/shipped")
		if err != nil {
			return false, err.Error(), nil
		}
		log, shipped = string(l), string(sh)
		_, lost, _ := shippedOnce(log, shipped)
		return lost == 0, fmt.Sprintf("%d line(s) not shipped", lost), nil
	})
	if log == "" && werr != nil {
		return "", "", werr
	}
	return log, shipped, nil // what is unshipped at the end is judged
}

// judgeFailOpen judges sidecar.failure.open on one kubelet's OpenSeen.
func judgeFailOpen(urls OpenURLs, seen OpenSeen) ([]string, error) {
	crash, ok := fixtures.First(seen.Events, CrashingAgent, "crash")
	if !ok {
		return nil, unjudged("the log agent never crashed (it was to once it had shipped %d lines): the outage was not seen: %s", shippedBeforeCrash, eventLines(seen.Events))
	}
	back, ok := firstAfter(seen.Events, CrashingAgent, "start", crash)
	if !ok {
		return nil, fmt.Errorf("the log agent crashed at %s and never started again", crash.UTC().Format("15:04:05.000"))
	}
	if err := appRanOn(seen); err != nil {
		return nil, err
	}
	down := func(t time.Time) bool { return !t.Before(crash) && t.Before(back) }
	direct, serviceFailed, lastFailed := 0, 0, time.Duration(0)
	for _, a := range attempts(seen.Events) {
		switch {
		case a.url == urls.App && !a.ok:
			return nil, fmt.Errorf("the app did not answer the client at its own address %s (attempt begun %s; the agent down from %s to %s)",
				a.url, a.began.UTC().Format("15:04:05.000"), crash.UTC().Format("15:04:05.000"), back.UTC().Format("15:04:05.000"))
		case a.url == urls.App && down(a.began):
			direct++
		case a.url == urls.Service && !a.ok && !a.began.Before(crash):
			serviceFailed++
			lastFailed = a.began.Sub(crash)
		}
	}
	if direct == 0 {
		return nil, unjudged("the client began no attempt at the app's address in the agent's %s outage: it cannot be judged", back.Sub(crash).Round(time.Millisecond))
	}
	written, lost, twice := shippedOnce(seen.Log, seen.Shipped)
	if lost+twice > 0 {
		return nil, fmt.Errorf("of the %d lines the app wrote, %d were never shipped and %d shipped twice across the agent's crash and restart", written, lost, twice)
	}
	return []string{fmt.Sprintf("the log agent crashed at %s and was back %s later; the app ran on, never restarted, and answered all %d attempts at its own address in the outage; every one of the %d lines it wrote was shipped once (the agent went on from its position); %s (measured, not judged)",
		crash.UTC().Format("15:04:05.000"), back.Sub(crash).Round(time.Millisecond), direct, written, serviceSeen(serviceFailed, lastFailed))}, nil
}

// serviceSeen says what the client met through the Service from the
// agent's crash on: the Pod's readiness counts its native sidecars', so a
// restarting helper may take it out of the Service's endpoints.
func serviceSeen(failed int, last time.Duration) string {
	if failed == 0 {
		return "through the Service every attempt from the crash on was answered"
	}
	return fmt.Sprintf("through the Service %d attempt(s) from the crash on failed, the last begun %s after it", failed, last.Round(time.Millisecond))
}

// appRanOn says whether the logged Pod's app ran through the agent's
// crash: started once and never restarted.
func appRanOn(seen OpenSeen) error {
	starts := 0
	for _, e := range seen.Events {
		if e.Who == "app" && strings.HasPrefix(e.What, "start") {
			starts++
		}
	}
	st := seen.Pod.Status.ContainerStatuses
	if starts != 1 || len(st) != 1 || st[0].RestartCount != 0 {
		return fmt.Errorf("the app did not run on through its helper's crash: started %d times, %s", starts, containerStates(seen.Pod))
	}
	return nil
}

// shippedOnce counts the app's numbered lines ("line N") in log, whole
// lines only, and of them those shipped never and more than once.
func shippedOnce(log, shipped string) (written, lost, twice int) {
	written = strings.Count(log, "\n")
	count := map[string]int{}
	for _, l := range strings.Split(shipped, "\n") {
		count[l]++
	}
	for n := 1; n <= written; n++ {
		switch c := count["line "+strconv.Itoa(n)]; {
		case c == 0:
			lost++
		case c > 1:
			twice++
		}
	}
	return written, lost, twice
}
