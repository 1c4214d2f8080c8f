package promise

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// ID names a promise for good: reports, waivers and users' CI refer to it,
// so an ID is never reused for another promise.
type ID string

// Promise is one thing a certification proves.
type Promise struct {
	ID ID
	// Statement is the promise in one line, as a report shows it.
	Statement string
}

var idRE = regexp.MustCompile(`^[a-z]+(\.[a-z0-9]+(-[a-z0-9]+)*)+$`)

// catalogue is every promise of ../../shared/DESIGN.md, by area. Adding a
// promise here is the first step of checking it; a check reports its
// verdict under the ID it finds here.
var catalogue = []Promise{
	// The rolling replacement of the control planes, under traffic.
	{"rollout.versions", "every control plane's own apiserver reports the version the rollout moved it to"},
	{"rollout.no-lost-writes", "no write the cluster acknowledged is missing after the rollout"},
	{"rollout.no-missed-watch-events", "a watch open through the rollout delivers every acknowledged write"},
	{"rollout.no-false-404", "no request for a resource some apiserver serves answers 404 while the proxy is on"},
	{"rollout.no-false-403", "no request through the load balancer by a user the cluster authorizes is denied (403) during the rollout"},
	{"rollout.kubelet-access", "after each rollout every control plane's own apiserver reaches every node's kubelet API (a Pod's log read through it: the path of kubectl logs, exec and port-forward); a 1.36 apiserver's kubelet client is granted it by the RBAC rules kubeadm upgrade apply creates, which a surge must create too"},
	{"rollout.membership", "after each step etcd members, apiserver identity leases and load-balancer backends equal the control planes"},
	{"rollout.rollback", "a rollback from the mixed window returns every control plane to the older version, every object intact"},
	{"rollout.interrupted-recovers", "a rollout cut short mid-join is recovered by a rollback, nothing half-joined left"},
	{"rollout.refuses-bad-input", "a rollout the skew policy forbids is refused and changes nothing"},
	{"rollout.disruption-budget", "unavailability per backend and connection type stays within the budgets"},
	{"rollout.guard.halts", "a breach made on purpose (forwarded requests black-holed) halts the rollout at the next step, before any older control plane goes, and it is rolled back"},
	{"rollout.guard.quiet", "the rollout guard halts no healthy rollout, and decides its signals on enough requests in each"},
	{"rollout.discovery.each-step", "after every step of a rollout under the traffic, every apiserver's peer-merged discovery shows what the apiservers then serve and nothing more, within 30 s (twice the 15 s a peer's endpoint record lives)"},
	{"rollout.forwarded-objective", "over every rollout under the traffic, forwarded requests meet the proxy's service objective: at most 1% answered 5xx or not at all (KEP-4020), and forwarding adds at most 1 s at p99, on at least 100 of each"},

	// The Mixed Version Proxy in the mixed window.
	{"proxy.load.concurrent", "eight clients at once on every apiserver list the newer-only resource for 10 s: forwarded lists meet the proxy's objective (at most 1% failed, at most 1 s added at p99 over the same list served locally), no apiserver that serves it forwards anything back, and each older entry's own reads stay unharmed (none failed, p99 within 1 s)"},
	{"proxy.route.verbs", "an old apiserver serves a resource only its newer peer knows, for get, list, create, update, delete and watch"},
	{"proxy.route.runtime-config", "an API turned off on one apiserver is served by forwarding to a peer"},
	{"proxy.route.no-false-forwarding", "a resource that exists nowhere is 404 everywhere and is not forwarded"},
	{"proxy.route.baseline-false-404", "with the proxy off the false 404 is reproduced"},
	{"proxy.route.loop-guard", "a request already marked x-kubernetes-peer-proxied is served locally, never forwarded again"},
	{"proxy.route.peer-status", "a request the peer refuses answers through the proxy as the peer itself: 409 for a conflict, 422 for an invalid object, 410 for an expired watch, with the peer's Status details"},
	{"proxy.route.resource-version", "a resourceVersion never goes backwards across the hop: reads and watches through the proxy start at or after every write the peer acknowledged"},
	{"proxy.trust.identity", "the original user's identity reaches the peer"},
	{"proxy.trust.uid", "the original user's UID reaches the peer (each apiserver reading X-Remote-Uid, --requestheader-uid-headers, which kubeadm does not set)"},
	{"proxy.trust.forged-headers", "a client forging X-Remote-* or the hop marker gains nothing, also on a forwarded request"},
	{"proxy.trust.rbac-at-entry", "RBAC denies at the entry server; the peer never sees the request"},
	{"proxy.trust.untrusted-peer", "a peer whose certificate the peer CA did not sign receives nothing"},
	{"proxy.trust.forged-lease", "an identity Lease forged to point elsewhere receives nothing"},
	{"proxy.audit.final-stage", "a proxied request other than a watch ends at the entry server in a final audit stage that is not Panic"},
	{"proxy.audit.watch-final-stage", "a proxied watch its client closes ends at the entry server in a final audit stage that is not Panic"},
	{"proxy.audit.complete", "every proxied request is logged by both servers under one audit ID with the original user, counted"},
	{"proxy.audit.run-complete", "every request forwarded in the whole run, any client's, ends in one final audit stage at its entry server and at exactly one peer"},
	{"proxy.metrics.rerouted", "apiserver_rerouted_request_total moves by exactly the proxied count"},
	{"proxy.metrics.peer-proxy-errors", "apiserver_peer_proxy_errors_total moves under the faults that reach it"},
	{"proxy.fault.black-hole", "a black-holed peer link gives an explicit 503 within a bound, never a 404 or a hang"},
	{"proxy.fault.slow-link", "a slowed peer link is slower below the timeouts and an explicit 503 above them"},
	{"proxy.fault.no-duplicate-write", "a write is never retried into a duplicate"},
	{"proxy.fault.peer-stopped", "with a capable peer stopped, the next capable peer serves"},
	{"proxy.fault.peer-killed", "with a capable peer killed (its Lease left behind), clients get an explicit 503 within a bound until the next capable peer serves"},
	{"proxy.fault.only-peer-gone", "with the only capable peer gone, an old apiserver answers an explicit 503, not a 404"},
	{"proxy.defaults.beta", "1.36 servers proxy on the Beta default (gate unset) once --peer-ca-file is set, and not with it off"},
	{"proxy.discovery.converges", "peer-aggregated discovery on /apis converges after each step, within a measured time"},
	{"proxy.scope.crd-apiservice", "CRD- and APIService-backed groups are not proxied and fail fast"},
	{"proxy.rollback.gate-off", "turning the proxy off restores the pre-proxy behaviour, and on again it forwards"},
	{"proxy.rollback.all-old", "after a rollback to all-old servers nothing from before is lost and nothing is forwarded"},

	// The migration to native sidecars, on kubelets of both versions.
	{"sidecar.start.order", "the app starts only after the sidecar is started, or ready when it has a probe"},
	{"sidecar.readiness.gates", "a sidecar readiness failure keeps the Pod out of service and halts the rollout"},
	{"sidecar.crash.restarts-alone", "a sidecar crash restarts the sidecar alone"},
	{"sidecar.oom.restarts-alone", "a native sidecar the kernel kills for memory at its limit (OOMKilled) is restarted alone: the app runs on, never restarted"},
	{"sidecar.hung.out-of-service", "a sidecar that hangs, alive and silent, takes its Pod out of the Service's ready endpoints within its readiness probe's bound; the app runs on, and its liveness probe restarts the sidecar alone, back in service within the probes' bound"},
	{"sidecar.eviction.order", "under memory pressure the kubelet evicts first the Pod whose usage exceeds its request, not the Pod whose usage is within its request only by its native sidecar's (the sidecar formula) though over its app's alone, and leaves that Pod running"},
	{"sidecar.failure.closed", "a security proxy in front of the app fails closed: while it is down no request reaches the app - through the Service, at the Pod's proxy port or at the app's own port - tried from a client Pod, and every request the app served came through the proxy; the Service serves again within 21 s of the crash (the kubelet's relist, a first restart not backed off, the proxy's load and readiness probe)"},
	{"sidecar.least-privilege", "a hardened helper migrated to a native sidecar keeps its least privilege, in the Pod the API server admits under Pod Security \"restricted\" and in the process the node runs: no root uid, no capabilities, no privilege escalation, a seccomp filter, a read-only root filesystem, and the Pod's own service account with no token mounted into the helper"},
	{"sidecar.network-policy", "a NetworkPolicy that admits only labelled clients, and only at the security proxy's port, holds alike for the Pod whose proxy is a native sidecar and for the legacy Pod, enforced by the cluster's network plugin: with no policy a client reaches both ports of both Pods; under it the admitted client reaches each proxy port on every attempt and neither app's own port on any, and a client it does not admit reaches nothing; not applicable only where the policy changed nothing on any node and each node's engine says why (its rules refused, or none runs)"},
	{"sidecar.failure.open", "an optional helper (a log agent) fails open: while it is down and restarting the app runs on, never restarted, answering at its own address, and once back the helper ships every line the app wrote, none lost or twice; the Service's share of the outage is measured"},
	{"sidecar.termination.reverse-order", "the app stops first, then the sidecars in reverse order"},
	{"sidecar.termination.bounded-flush", "a log agent flushes within the grace period and the lines it lost are counted"},
	{"sidecar.termination.sigterm-ignored", "a sidecar that ignores SIGTERM is bounded by the grace period"},
	{"sidecar.job.completes", "a Job with a native sidecar completes"},
	{"sidecar.job.sidecar-crashes", "a Job whose native sidecar keeps crashing ends on its app's result; the sidecar's restarts are reported apart and cost the Job nothing"},
	{"sidecar.resources.formula", "effective Pod requests and ResourceQuota accounting follow the sidecar formula"},
	{"sidecar.resources.quota-admission", "a quota between the two formulas admits the legacy Pod and rejects the native one, with the quota's reason"},
	{"sidecar.resources.limits-qos", "the Pod's QoS class and the kubelet's Pod cgroup limits follow the sidecar formula for limits"},
	{"sidecar.resources.scheduling", "a node whose free capacity fits the legacy Pod's requests but not the native one's, by the sidecar formula, leaves the native Pod Pending with the scheduler's reason, never bound to it, and takes the legacy Pod"},
	{"sidecar.stripped.preflight", "a webhook that strips restartPolicy is detected before rollout by a server-side dry run"},
	{"sidecar.stripped.shapes", "both failure shapes of a stripped restartPolicy are reported: rejection with probes, stuck in Init without"},
	{"sidecar.stripped.old-client", "an old client's read-modify-write that drops restartPolicy is caught by the migration's checks"},
	{"sidecar.migration.batches", "the migration goes batch by batch and stops at the first batch that breaches a stop condition"},
	{"sidecar.migration.stop-conditions", "every stop condition a user sets (ready latency, readiness failures, unavailable replicas, flush loss) stops the expansion when breached, naming what it saw"},
	{"sidecar.canary.compared", "the migration's canary, Pods of the native template beside the legacy one's on the same nodes and created at once, stays within a stop condition on each metric a platform team decides on: create-to-Ready p50 and p99, readiness failures, restarts, request errors through the proxy, log lines lost on deletion, memory and CPU peaks, Job completion; the table of both is in results.json and report.html"},
	{"sidecar.migration.rollback", "a rollback restores the legacy template, verified by hash, ports, volumes and service account, and the Pods it runs again are as the legacy Pods were admitted: no restartable init container left, the same containers, ports, mounts, volumes and service account, and what admission added to them"},
	{"sidecar.migration.node-replaced", "a migration batch whose worker is drained and replaced while it rolls out (a node pool upgrade beside the migration) ends without breaching its stop conditions, armed through the drain (one of its two replicas unavailable at most, as its disruption budget allows; no restart, no readiness failure); it accounts for the Pods the drain moved, each native Pod evicted stopped its app first and its sidecars in reverse order with every line shipped, and the batch ends native on the new worker"},
	{"sidecar.worker-replaced", "a worker replaced by a newer one with sidecar Pods on it keeps the ordering guarantees"},

	// The whole run.
	{"cluster.no-unexpected-restarts", "no component restarts, crashes or is evicted unless a step meant it to"},
	{"cluster.nodes-stay-ready", "a node no step acts on stays Ready: rolling or faulting the control plane never cuts a worker's kubelet off for the node monitor's grace period"},
}

// Catalogue is every promise, sorted by ID.
func Catalogue() []Promise {
	out := append([]Promise(nil), catalogue...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Area is the first part of the ID: rollout, proxy, sidecar, cluster.
func (id ID) Area() string {
	a, _, _ := strings.Cut(string(id), ".")
	return a
}

// Areas are the catalogue's areas, in the order they first appear.
func Areas() []string {
	var out []string
	for _, p := range catalogue {
		if a := p.ID.Area(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// renamed are the areas whose name changed, old to new. An ID or a shard
// under the old name is read as the new one, and the reader says so: a
// user's waivers file and a CI matrix's --shard keep working (mvp became
// proxy in December 2026: a newcomer reads "proxy" where "mvp" had to be
// decoded), until the first tagged release drops the alias.
var renamed = map[string]string{"mvp": "proxy"}

// Canonical is id under its area's current name, and the note to give
// when it was renamed ("" when not).
func Canonical(id ID) (ID, string) {
	area, rest, dotted := strings.Cut(string(id), ".")
	to, ok := renamed[area]
	if !ok || !dotted {
		return id, ""
	}
	now := ID(to + "." + rest)
	return now, fmt.Sprintf("%s is %s now (area %s renamed %s); the old name is read until the first tagged release", id, now, area, to)
}

// CanonicalArea is area under its current name, and the note to give when
// it was renamed ("" when not).
func CanonicalArea(area string) (string, string) {
	to, ok := renamed[area]
	if !ok {
		return area, ""
	}
	return to, fmt.Sprintf("area %s is %s now; the old name is read until the first tagged release", area, to)
}

// Lookup finds a promise by ID.
func Lookup(id ID) (Promise, bool) {
	for _, p := range catalogue {
		if p.ID == id {
			return p, true
		}
	}
	return Promise{}, false
}

// checkCatalogue says what is wrong with a catalogue: malformed or
// repeated IDs, empty statements.
func checkCatalogue(c []Promise) error {
	seen := map[ID]bool{}
	for _, p := range c {
		switch {
		case !idRE.MatchString(string(p.ID)):
			return fmt.Errorf("promise ID %q: want area.name in lowercase, e.g. proxy.route.verbs", p.ID)
		case seen[p.ID]:
			return fmt.Errorf("promise ID %q appears twice", p.ID)
		case p.Statement == "":
			return fmt.Errorf("promise %s has no statement", p.ID)
		}
		seen[p.ID] = true
	}
	return nil
}
