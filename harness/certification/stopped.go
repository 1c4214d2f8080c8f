package certification

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/faults"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// CheckPeerStopped judges proxy.fault.peer-stopped in a window with two
// newer apiservers or more. First, 20 lists of the window's resource
// through the first older apiserver are spread over every capable peer
// (each serves at least one, by the audit logs). Then the first newer one
// is stopped cleanly (its identity Lease goes with it) and the resource
// is asked for through the older one every half second for 20 s: no 404
// (another capable peer serves it) and no answer slower than answerBound;
// after that, 10 lists are each served, all by the remaining peers. The
// apiserver is started again before it returns.
func CheckPeerStopped(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.fault.peer-stopped"
	if len(w.New) < 2 {
		return promise.Errored(id, "the check needs a window with two newer apiservers; this one has %d: no next capable peer", len(w.New))
	}
	old, gone, rest := w.Old[0], w.New[0], w.New[1:]
	if _, err := w.RouteWorks(ctx, "default"); err != nil {
		return fail(id, "%v", err)
	}
	lists := func(n int) ([]string, error) {
		ids := &auditIDs{}
		api, err := w.api(old, "default", ids)
		if err != nil {
			return nil, err
		}
		for i := range n {
			if _, err := api.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return nil, fmt.Errorf("list %d of %d through %s: %w", i+1, n, old.Name, err)
			}
		}
		return servedAt(ctx, c, w.New, ids.all())
	}
	spread, err := lists(20)
	if err != nil {
		return fail(id, "before the fault: %v", err)
	}
	ev := []string{fmt.Sprintf("20 lists of %s through %s, served by %s", w.Resource.Key(), old.Name, tally(spread))}
	for _, p := range w.New {
		if !slices.Contains(spread, p.Name) {
			return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev,
				Reason: fmt.Sprintf("%s forwarded none of 20 lists to the capable peer %s", old.Name, p.Name)}
		}
	}
	node, err := c.Node(ctx, gone.Name)
	if err != nil {
		return fail(id, "%v", err)
	}
	stop := &faults.StopAPIServer{Node: node}
	var as []Attempt
	var after []string
	if err := injected(ctx, c, stop, func() error {
		if as, err = w.Probe(ctx, old, 20*time.Second, 500*time.Millisecond, 35*time.Second); err != nil {
			return err
		}
		after, err = lists(10)
		return err
	}); err != nil {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev, Reason: fmt.Sprintf("with %s stopped: %v", gone.Name, err)}
	}
	ev = append(ev, fmt.Sprintf("%s: through %s every 500 ms for 20 s: %v; %s", stop.Name(), old.Name, Codes(as), strings.Join(messages(as), ", ")),
		fmt.Sprintf("then 10 lists through %s, served by %s", old.Name, tally(after)))
	return stoppedVerdict(gone.Name, names(rest), as, after, ev)
}

// stoppedVerdict judges proxy.fault.peer-stopped on what was seen with the
// capable peer gone stopped and rest serving: the attempts made through
// the entry meanwhile (as) and the servers that logged the lists made
// after them; ev is the evidence so far.
func stoppedVerdict(gone string, rest []string, as []Attempt, after, ev []string) promise.Verdict {
	const id = "proxy.fault.peer-stopped"
	if v := underFault(id, "requests through the entry with "+gone+" stopped", len(as)); v != nil {
		return *v
	}
	if v := underFault(id, fmt.Sprintf("servers of %v that logged the lists", rest), len(after)); v != nil {
		return *v
	}
	var bad []string
	for _, a := range as {
		switch {
		case a.Code == 0 || a.Took > answerBound:
			bad = append(bad, "no answer within "+answerBound.String()+": "+a.String())
		case a.Code == 404:
			bad = append(bad, "a false 404: "+a.String())
		}
	}
	if slices.Contains(after, gone) {
		bad = append(bad, fmt.Sprintf("the stopped %s logged a request after its stop", gone))
	}
	if len(bad) > 0 {
		return promise.Verdict{ID: id, Outcome: promise.Fail, Evidence: ev,
			Reason: fmt.Sprintf("with %s stopped and %v serving: %s", gone, rest, strings.Join(bad[:min(3, len(bad))], "; "))}
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: ev}
}
