package traffic

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// Stop ends the streams and accounts for every acknowledged write: a final
// list through the load balancer must find it, and the watch must have
// delivered it (given a grace period to catch up).
func (t *Traffic) Stop(ctx context.Context) (Summary, error) {
	t.mu.Lock()
	for _, stop := range t.streams {
		stop()
	}
	t.mu.Unlock()
	t.wg.Wait()
	defer t.stopAll()
	_ = t.Refresh(ctx)
	t.endPhase()

	stored, err := t.stored(ctx)
	if err != nil {
		return Summary{}, err
	}
	var s Summary
	err = wait.For(ctx, "traffic/watch-catch-up", "the watch to deliver every acknowledged write", func(context.Context) (bool, string, error) {
		s = t.account(stored)
		return len(s.MissedWatchEvents) == 0, fmt.Sprintf("%d not delivered", len(s.MissedWatchEvents)), nil
	})
	// The catch-up is a grace period, not a promise: the events the watch
	// has still not delivered when it ends are reported in s, not as an
	// error. A cancelled context is, lest a grace period cut short be
	// reported as events the watch missed.
	if err != nil && ctx.Err() != nil {
		return Summary{}, fmt.Errorf("failed to account for the traffic: %w", err)
	}
	sort.Strings(s.LostWrites)
	sort.Strings(s.MissedWatchEvents)
	for _, p := range s.Phases {
		s.FalseNotFound += p.FalseNotFound
		s.NewAPIChecked += p.Checked
	}
	t.mu.Lock()
	var forbidden []Record
	for _, r := range t.records {
		if r.Probe == "new-api" && r.Code == http.StatusNotFound && t.phaseAdvertised[r.Phase][r.Target] {
			s.FalseNotFoundRecords = append(s.FalseNotFoundRecords, r)
		}
		if r.Code == http.StatusForbidden {
			forbidden = append(forbidden, r)
		}
	}
	records := t.records
	t.mu.Unlock()
	if len(forbidden) > 0 {
		if s.Forbidden, err = t.explain(forbidden, records); err != nil {
			return Summary{}, err
		}
	}
	if len(s.FalseNotFoundRecords) > 0 {
		if s.NotFound, err = t.explainNotFound(s.FalseNotFoundRecords); err != nil {
			return Summary{}, err
		}
	}
	return s, nil
}

// stored are the names of the objects the writers made that a final list
// through the load balancer finds.
func (t *Traffic) stored(ctx context.Context) (map[string]bool, error) {
	cfg, err := t.c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().ConfigMaps(t.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: writeLabel + "=write"})
	if err != nil {
		return nil, fmt.Errorf("failed to list the written objects: %w", err)
	}
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
	}
	return stored, nil
}

// explainNotFound finds each false 404 in the audit logs, and what the
// apiserver that answered it logged (the cluster's kept apiserver logs).
func (t *Traffic) explainNotFound(notFound []Record) ([]NotFound, error) {
	events, err := t.auditEvents(notFound)
	if err != nil {
		return nil, fmt.Errorf("failed to find the false 404s in the audit logs: %w", err)
	}
	// The apiservers the traffic addressed directly: every control plane
	// the cluster had while it ran, each a peer a rebuild may have missed.
	var nodes []string
	t.mu.Lock()
	for _, r := range t.records {
		if r.Target != "lb" && !slices.Contains(nodes, r.Target) {
			nodes = append(nodes, r.Target)
		}
	}
	t.mu.Unlock()
	return ExplainNotFound(notFound, t.opts.NewAPIPath, events, t.c.APIServerLog, nodes), nil
}

// explain finds each 403 in the audit logs of the apiservers.
func (t *Traffic) explain(forbidden, records []Record) ([]Forbidden, error) {
	events, err := t.auditEvents(forbidden)
	if err != nil {
		return nil, fmt.Errorf("failed to find the 403s in the audit logs: %w", err)
	}
	return ExplainForbidden(forbidden, records, events, t.c.APIServerLog), nil
}

// auditEvents are the final audit events of records, by audit ID, from
// every apiserver's audit log.
func (t *Traffic) auditEvents(records []Record) (map[string][]audit.Logged, error) {
	paths, err := t.c.AuditLogs()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range records {
		ids = append(ids, r.AuditID)
	}
	return audit.Final(paths, ids)
}

// account checks every acknowledged write against stored, the names a
// final list found, and against what the watch has delivered so far.
func (t *Traffic) account(stored map[string]bool) Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	capable := func(phase, target string) bool { return t.phaseAdvertised[phase][target] }
	s := Summary{Requests: len(t.records), Acked: len(t.acked), Phases: Summarize(t.records, capable), NewAPIProbed: t.opts.NewAPIPath != "",
		Backends: Disruption(t.records), Steps: Steps(t.records)}
	for name := range t.acked {
		if !stored[name] {
			s.LostWrites = append(s.LostWrites, name)
		}
		if !t.seen[name] {
			s.MissedWatchEvents = append(s.MissedWatchEvents, name)
		}
	}
	return s
}
