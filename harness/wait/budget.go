package wait

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Budget bounds a wait: how long in all, and how long between two looks.
type Budget struct{ Timeout, Interval time.Duration }

// Validate refuses a budget that cannot bound a wait: a timeout or an
// interval that is not positive, or an interval longer than the timeout,
// under which the condition would be looked at only once.
func (b Budget) Validate() error {
	switch {
	case b.Timeout <= 0:
		return fmt.Errorf("invalid wait budget: timeout %s is not positive", b.Timeout)
	case b.Interval <= 0:
		return fmt.Errorf("invalid wait budget: interval %s is not positive", b.Interval)
	case b.Interval > b.Timeout:
		return fmt.Errorf("invalid wait budget: interval %s is longer than timeout %s", b.Interval, b.Timeout)
	}
	return nil
}

// budgets is the one table of timeouts, keyed "<area>/<key>" as
// cluster-api keys its e2e intervals: a budget is changed here, and a
// timeout's error can be traced back to its line.
var budgets = map[string]Budget{
	// systemd running in a new node container: seconds on an idle machine,
	// over a minute on 2 cores while another cluster is being made.
	"cluster/node-systemd": {Timeout: 3 * time.Minute, Interval: 500 * time.Millisecond},
	// A drained node's Pods gone.
	"rollout/drain": {Timeout: 3 * time.Minute, Interval: time.Second},
	// kube-proxy updated on every node and CoreDNS rolled out after
	// kubeadm's addon phase (their images already on the nodes).
	"rollout/addons": {Timeout: 3 * time.Minute, Interval: time.Second},
	// A joiner's kube-proxy Ready once it holds the image: the kubelet
	// retries a failed pull with a backoff that doubles from 10 s.
	"rollout/node-proxy": {Timeout: 3 * time.Minute, Interval: time.Second},
	// A new worker's Node Ready with its kubelet at the version.
	"rollout/worker-ready": {Timeout: 3 * time.Minute, Interval: time.Second},
	// A new control plane's apiserver at the version, its /readyz ok and
	// its Node Ready.
	"rollout/control-plane-ready": {Timeout: 4 * time.Minute, Interval: 500 * time.Millisecond},
	// The apiserver of a node kubeadm upgrades in place serving again, once
	// stopped as its etcd member is replaced or replaced itself: kubeadm's
	// own wait for a component is 5 minutes (UpgradeManifestsTimeout).
	"rollout/apiserver-replaced": {Timeout: 5 * time.Minute, Interval: time.Second},
	// A control plane's static Pods run again as its kubelet, restarted as
	// another version, computes them: an orphan's graceful stop (a static
	// Pod's grace period, 30 s), the kubelet's first restart back-off for
	// a container that lost its port to the orphan (10 s) and an
	// apiserver's start (up to a minute here) fit in half of it.
	"rollout/static-pods-settled": {Timeout: 3 * time.Minute, Interval: time.Second},
	// An apiserver that has just restarted answering /version: it refuses
	// connections while starting and answers 403 until its authorizer
	// has synced.
	"rollout/apiserver-version": {Timeout: 30 * time.Second, Interval: time.Second},
	// An apiserver told to stop gracefully failing /readyz: at once when
	// no --shutdown-delay-duration is set (kubeadm sets none); the budget
	// is for one that is set.
	"cluster/apiserver-stopping": {Timeout: 2 * time.Minute, Interval: 500 * time.Millisecond},
	// An apiserver's container gone, restarted, or its /readyz ok.
	"faults/apiserver-restart": {Timeout: 3 * time.Minute, Interval: time.Second},
	// A slow link's relay listening in the sender's node.
	"faults/relay-listening": {Timeout: 30 * time.Second, Interval: time.Second},
	// The traffic's watch delivering the events it has not yet delivered
	// once the streams stop: a grace period, not a promise.
	"traffic/watch-catch-up": {Timeout: 15 * time.Second, Interval: 500 * time.Millisecond},
	// Every apiserver's peer-merged discovery showing what only the newer
	// version serves, once a newer apiserver has joined.
	"certify/discovery-converges": {Timeout: 3 * time.Minute, Interval: time.Second},
	// Until an older apiserver forwards the new resource once the window
	// opens, or once it has restarted. The proxy routes by the
	// peer-discovery cache merged discovery shows, so the route works as
	// discovery converges (seen 0 s after it, which itself took 1.6-2.4
	// s, and 0 s after a restart): 30 s is twice the 15 s TTL of a
	// peer's endpoint record and three renewals of its identity Lease
	// (every 10 s), and what a build that cannot route costs before it
	// fails (90 s until session 33: a minute of the negative control
	// spent on nothing).
	"certify/route-works": {Timeout: 30 * time.Second, Interval: time.Second},
	// Until a new ClusterRoleBinding allows a service account on a server.
	"certify/rbac-reaches-servers": {Timeout: time.Minute, Interval: time.Second},
	// Until a Job with a native sidecar completes (image already on the node).
	"certify/sidecar-job": {Timeout: 3 * time.Minute, Interval: time.Second},
	// Until a sidecar check's Pod reaches a state (started, ready, a
	// sidecar restarted), its image already on the node.
	"certify/sidecar-pod": {Timeout: 2 * time.Minute, Interval: time.Second},
	// Until a fixture has recorded an event the Pod's state says happened.
	"certify/sidecar-event": {Timeout: 30 * time.Second, Interval: time.Second},
	// Until a Deployment of a sidecar check is available, or its rollout
	// halts past its progress deadline (20 s).
	"certify/sidecar-deployment": {Timeout: 2 * time.Minute, Interval: 2 * time.Second},
	// Until an apiserver serves a CRD just made.
	"certify/crd-established": {Timeout: time.Minute, Interval: time.Second},
	// Until a stopped apiserver's identity Lease is gone: it deletes its
	// own on a graceful stop, within its shutdown.
	"certify/lease-gone": {Timeout: 30 * time.Second, Interval: 500 * time.Millisecond},
	// Until apiservers have written a request's final audit event.
	"certify/audit-written": {Timeout: 15 * time.Second, Interval: time.Second},
}

// Named returns the budget registered under name in the table of
// timeouts; an unknown name is an error, never a silent default.
func Named(name string) (Budget, error) {
	b, ok := budgets[name]
	if !ok {
		return Budget{}, fmt.Errorf("no timeout named %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return b, nil
}

// Names lists the table's names, sorted, for errors and documentation.
func Names() []string {
	names := make([]string, 0, len(budgets))
	for name := range budgets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
