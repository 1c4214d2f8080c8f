package certification

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/metrics"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/report"
	"github.com/skewer-k8s/skewer/harness/restarts"
	"github.com/skewer-k8s/skewer/harness/rollout"
	"github.com/skewer-k8s/skewer/harness/sidecar"
	"github.com/skewer-k8s/skewer/harness/sidecarchecks"
	"github.com/skewer-k8s/skewer/harness/traffic"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/harness/wait"
	"github.com/skewer-k8s/skewer/internal/source"
)

// canFail is, per promise of the catalogue, evidence of the failure the
// promise describes, fed through the code that judges it: a release
// manager signs for every pass, so every promise must be shown able to
// fail (issue 31, item 7). Where a waiver may cover the promise, the
// evidence carries no cause the waiver names: it stays a failure.
var canFail = []struct {
	id      promise.ID
	name    string
	verdict func(t *testing.T) promise.Verdict
}{
	{"rollout.no-lost-writes", "an acknowledged write missing from the final list", func(t *testing.T) promise.Verdict {
		return trafficVerdict(t, "rollout.no-lost-writes", traffic.Summary{Requests: 500, NewAPIProbed: true, LostWrites: []string{"skewer-w-17"}})
	}},
	{"rollout.no-missed-watch-events", "an acknowledged write the watch never delivered", func(t *testing.T) promise.Verdict {
		return trafficVerdict(t, "rollout.no-missed-watch-events", traffic.Summary{Requests: 500, NewAPIProbed: true, MissedWatchEvents: []string{"skewer-w-17"}})
	}},
	{"rollout.no-false-404", "a 404 through the load balancer for a resource a newer apiserver serves, in no audit log", func(t *testing.T) promise.Verdict {
		return trafficVerdict(t, "rollout.no-false-404", traffic.Summary{Requests: 500, NewAPIProbed: true, FalseNotFound: 1,
			FalseNotFoundRecords: []traffic.Record{{Time: time.Unix(0, 0), Verb: "list", Object: "mutatingadmissionpolicies", Target: "lb", Code: 404, Phase: "drain cp2"}}})
	}},
	{"rollout.no-false-403", "a 403 through the load balancer that no later success explains", func(t *testing.T) promise.Verdict {
		return trafficVerdict(t, "rollout.no-false-403", traffic.Summary{Requests: 500, NewAPIProbed: true, Forbidden: []traffic.Forbidden{{
			Record: traffic.Record{Time: time.Unix(0, 0), Target: "lb", Conn: traffic.New, Verb: "create", Code: 403, AuditID: "a1"},
			Logged: "cp1", Decision: "forbid", Cause: promise.UnknownCause}}})
	}},
	{"rollout.disruption-budget", "5% of new connections through the load balancer failed", func(t *testing.T) promise.Verdict {
		return traffic.DisruptionVerdict([]report.Backend{
			{Target: "lb", Conn: traffic.Reused, Requests: 1000, Failed: 0, Codes: map[int]int{200: 1000}},
			{Target: "lb", Conn: traffic.New, Requests: 1000, Failed: 50, Codes: map[int]int{200: 950, 503: 50}, Unavailable: 2 * time.Second},
		}, promise.Budget{MaxFailed: 0.01, MaxUnavailable: 15 * time.Second})
	}},
	{"cluster.no-unexpected-restarts", "CoreDNS restarted in a phase that meant only the control plane", func(t *testing.T) promise.Verdict {
		t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
		meant := Meant([]report.Phase{{Name: "roll", Start: t0, End: t0.Add(time.Minute)}}, map[string]*Meaning{"roll": {Words: []string{restarts.ControlPlane}}})
		return restarts.Check([]restarts.Event{{Kind: restarts.Container, Time: t0.Add(30 * time.Second), Node: "w1", Namespace: "kube-system",
			Pod: "coredns-1", Container: "coredns", Count: 1, ExitCode: 137, Reason: "Error"}}, meant)
	}},
	{"cluster.nodes-stay-ready", "a worker no step acted on left Ready, its kubelet's requests unread", func(t *testing.T) promise.Verdict {
		t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
		meant := Meant([]report.Phase{{Name: "roll", Start: t0, End: t0.Add(time.Minute)}}, map[string]*Meaning{"roll": {Words: []string{restarts.ControlPlane}}})
		return restarts.StayReady([]restarts.Event{{Kind: restarts.NotReady, Time: t0.Add(30 * time.Second), Node: "w1", Reason: "NodeStatusUnknown"}}, meant, nil)
	}},
	{"proxy.audit.run-complete", "a peer that stays up never ends a request its entry ended", func(t *testing.T) promise.Verdict {
		t0 := time.Date(2026, 12, 1, 17, 44, 0, 0, time.UTC)
		s := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Second))) }
		l := &auditLogs{dir: t.TempDir(), lines: map[string][]logLine{}}
		l.alive("cp2", s(0), s(60))
		l.alive("cp4", s(0), s(60))
		l.event("cp2", "half-open", "Panic", s(10), s(11))
		l.event("cp4", "half-open", "ResponseStarted", s(10.1), s(10.2))
		return CheckRunAudit(l.write(t), nil)
	}},
	{"proxy.audit.complete", "a proxied request logged twice by the peer, another under another user", func(t *testing.T) promise.Verdict {
		w := &Window{Old: []Server{{Name: "cp1"}}, New: []Server{{Name: "cp4"}}}
		c := logs(t, map[string][]string{
			"cp1": {"a ResponseComplete admin 200", "b ResponseComplete admin 200"},
			"cp4": {"a ResponseComplete admin 200", "a ResponseComplete admin 200", "b ResponseComplete someone-else 200"},
		})
		return byID(t, "proxy.audit.complete", CheckAudit(t.Context(), c, w, []string{"a", "b"}))
	}},
	{"proxy.audit.final-stage", "a proxied create ended at the entry in stage Panic", func(t *testing.T) promise.Verdict {
		return byID(t, "proxy.audit.final-stage", FinalStages("cp1", []audit.Event{auditEvent("a", "create", "Panic", 500, ""), auditEvent("b", "watch", "ResponseComplete", 200, "")}, nil))
	}},
	{"proxy.audit.watch-final-stage", "a proxied watch in Panic at the entry that the peer never ended: not the reverse proxy's abort", func(t *testing.T) promise.Verdict {
		return byID(t, "proxy.audit.watch-final-stage", FinalStages("cp1", []audit.Event{auditEvent("a", "list", "ResponseComplete", 200, ""),
			auditEvent("b", "watch", "Panic", 500, "APIServer panic'd: net/http: abort Handler")}, nil))
	}},
	{"proxy.trust.forged-headers", "the peer believed a forwarded request's forged X-Remote-User/Group", func(t *testing.T) promise.Verdict {
		as := func(name string, groups ...string) *audit.Event {
			return &audit.Event{User: authnv1.UserInfo{Username: name, Groups: groups}}
		}
		return forgedHeaders(forgedVerdictInput{reader: "sa:reader", nobody: "sa:nobody", entry: "cp1",
			forwardedID: "f", atPeer: as("kubernetes-admin", "system:masters"), markedID: "m", markedEntry: as("sa:reader"), deniedID: "d", deniedEntry: as("sa:nobody")})
	}},
	{"proxy.metrics.peer-proxy-errors", "a 1.36 server's counter never moved with its only capable peer's address unresolvable", func(t *testing.T) promise.Verdict {
		before := parseMetrics(t, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 100\n")
		return peerProxyErrorsMoved(Server{Name: "cp1", Version: version.MustParse("v1.36.3")}, before, before, nil)
	}},
	{"proxy.fault.peer-killed", "with the only capable peer killed, a false 404 before any rebuild was logged", func(t *testing.T) promise.Verdict {
		v, _ := killedVerdict("cp1", "cp4", []Attempt{attempt(0, 5*time.Millisecond, 503), attempt(time.Second, 3*time.Millisecond, 404)}, true, time.Time{}, nil)
		return v
	}},
	{"proxy.fault.peer-stopped", "with a capable peer stopped and another serving, a false 404 and a hang", func(t *testing.T) promise.Verdict {
		return stoppedVerdict("cp4", []string{"cp5"}, []Attempt{attempt(0, 5*time.Millisecond, 200), attempt(time.Second, 3*time.Millisecond, 404),
			attempt(2*time.Second, 12*time.Second, 200)}, []string{"cp5", "cp5"}, nil)
	}},
	{"proxy.fault.black-hole", "under the black hole a list answered 404 and a create hung past the bound", func(t *testing.T) promise.Verdict {
		return holeVerdict("black hole cp1 -> cp4", "example.skewer.io/v1/widgets", "cp1", 65*time.Second,
			map[string]Attempt{"list": attempt(0, 5*time.Millisecond, 404), "create": attempt(0, 70*time.Second, 504)}, noAudit)
	}},
	{"proxy.fault.slow-link", "past the TLS handshake timeout a list was served late, not an explicit 503", func(t *testing.T) promise.Verdict {
		below := []Attempt{attempt(0, 310*time.Millisecond, 200), attempt(time.Second, 305*time.Millisecond, 200)}
		return slowVerdict("cp1", slowSeen{below: below, belowFault: "slow link +100ms", above: attempt(0, 24*time.Second, 200), aboveFault: "slow link +6s"})
	}},
	{"proxy.fault.no-duplicate-write", "a create given up by its client made two objects", func(t *testing.T) promise.Verdict {
		return dupVerdict(countedWrite("the create under the black hole", 1, "cp4", 3*time.Second), countedWrite("the create given up at +3 s each way", 2, "cp4", 8*time.Second))
	}},
	{"proxy.fault.only-peer-gone", "with the only capable peer stopped, 404s while its identity Lease was never seen gone", func(t *testing.T) promise.Verdict {
		return onlyGoneVerdict("cp1", "cp4", []Attempt{attempt(0, 5*time.Millisecond, 503), attempt(time.Second, 3*time.Millisecond, 404)}, 35*time.Second, time.Time{}, nil)
	}},
	{"proxy.route.verbs", "the watch through the older apiserver ended after ADDED, never delivering MODIFIED and DELETED", func(t *testing.T) promise.Verdict {
		_, v := watched("cp1", delivered("ADDED w-1"), []string{"ADDED w-1", "MODIFIED w-1", "DELETED w-1"}, time.After(20*time.Second))
		if v == nil {
			t.Fatal("every event delivered")
		}
		return *v
	}},
	{"proxy.route.runtime-config", "through the entry with node.k8s.io/v1 off, the watch ended after ADDED", func(t *testing.T) promise.Verdict {
		_, v := watched("cp4", delivered("ADDED rc-1"), []string{"ADDED rc-1", "MODIFIED rc-1", "DELETED rc-1"}, time.After(20*time.Second))
		if v == nil {
			t.Fatal("every event delivered")
		}
		return runtimeConfigRoute(*v, Server{Name: "cp4", Version: version.MustParse("v1.36.3")}, 3*time.Second)
	}},
	{"proxy.route.no-false-forwarding", "the rerouted counter moved for paths no server serves", func(t *testing.T) promise.Verdict {
		_, v := unmoved("cp1", false, []string{"/apis/nothing.skewer.io/v1/things"}, reroutedAt(t, 404, 2), reroutedAt(t, 404, 5))
		if v == nil {
			t.Fatal("judged unmoved")
		}
		return *v
	}},
	{"proxy.route.loop-guard", "a request marked proxied answered 404 but the counter moved: forwarded again", func(t *testing.T) promise.Verdict {
		return loopGuardVerdict(Server{Name: "cp1"}, "/apis/x/v1/ys", notFound(), reroutedAt(t, 404, 2), reroutedAt(t, 404, 3), func() error { return nil })
	}},
	{"proxy.route.peer-status", "a create of a name that exists answered 503 through the older apiserver, 409 by the peer", func(t *testing.T) promise.Verdict {
		gr := schema.GroupResource{Group: "x", Resource: "ys"}
		return peerStatusVerdict("cp1", "cp4", "x/v1/ys", []refused{{what: "create of a name that exists", want: 409,
			entry: apierrors.NewServiceUnavailable("error trying to reach service"), peer: apierrors.NewAlreadyExists(gr, "y-1")}})
	}},
	{"proxy.route.resource-version", "a list through the older apiserver answered before the write the peer had acknowledged", func(t *testing.T) promise.Verdict {
		return rvVerdict("x/v1/ys", []seenRV{{what: "create on cp4 itself", rv: "120", write: true}, {what: "consistent list through cp1", rv: "118"}})
	}},
	{"proxy.metrics.rerouted", "the rerouted counter moved by 4 for 5 forwarded gets", func(t *testing.T) promise.Verdict {
		return reroutedVerdict("cp1", "x/v1/ys", 5, reroutedAt(t, 404, 2), reroutedAt(t, 404, 6))
	}},
	{"proxy.scope.crd-apiservice", "an APIService without a backend answered 404 from a peer, not 503", func(t *testing.T) promise.Verdict {
		v := scopeAnswers(Server{Name: "cp1", Version: version.MustParse("v1.35.4")}, nil, notFound(), 30*time.Millisecond)
		if v == nil {
			t.Fatal("judged in scope")
		}
		return *v
	}},
	{"proxy.rollback.all-old", "after the rollback the resource only the newer version served is still served", func(t *testing.T) promise.Verdict {
		v := goneAfterRollback(discovery.Resource{Group: "x", Version: "v1", Resource: "ys"}, Server{Name: "cp1", Version: version.MustParse("v1.35.4")}, nil)
		if v == nil {
			t.Fatal("judged gone")
		}
		return *v
	}},
	{"proxy.route.baseline-false-404", "with the gate off the entry still served the resource: no false 404 reproduced", func(t *testing.T) promise.Verdict {
		return baselineVerdict("cp1 (v1.35.4) restarted with the gate off", 0, nil, func() error { return nil })
	}},
	{"proxy.rollback.gate-off", "with its flags back the entry never forwarded again", func(t *testing.T) promise.Verdict {
		return gateOnAgain("cp1", "x/v1/ys", 0, errors.New("timed out after 2m0s waiting for x/v1/ys to be served through cp1: last seen 404 the server could not find the requested resource"))
	}},
	{"proxy.defaults.beta", "without --peer-ca-file the entry still forwarded", func(t *testing.T) promise.Verdict {
		v := betaWithoutCA("cp4", "node.k8s.io/v1/runtimeclasses", 1, nil)
		if v == nil {
			t.Fatal("judged the false 404")
		}
		return *v
	}},
	{"proxy.trust.identity", "the peer logged the forwarded list as the entry server, not the service account", func(t *testing.T) promise.Verdict {
		seen := trustEvidence()
		seen.atPeer = &audit.Event{User: authnv1.UserInfo{Username: "system:apiserver", Groups: []string{"system:masters"}}}
		return identityVerdict(seen)
	}},
	{"proxy.trust.uid", "the peer logged the forwarded list without the user's UID", func(t *testing.T) promise.Verdict {
		seen := trustEvidence()
		seen.atPeer.User.UID = ""
		return uidVerdict(seen)
	}},
	{"proxy.trust.rbac-at-entry", "a denied request reached a peer", func(t *testing.T) promise.Verdict {
		seen := trustEvidence()
		seen.deniedAtPeers = []string{"cp4 (d)"}
		return rbacVerdict(seen)
	}},
	{"proxy.trust.forged-lease", "packets left the entry's node for the address a forged Lease names", func(t *testing.T) promise.Verdict {
		return forgedLeaseVerdict(forgedLeaseSeen{lease: "kube-apiserver-skewer-forged-1", entry: "cp1", node: "cp1", lists: 20, where: []string{"cp4"}, packets: 3})
	}},
	{"proxy.trust.untrusted-peer", "requests served by a peer whose certificate the peer CA did not sign", func(t *testing.T) promise.Verdict {
		start := parseMetrics(t, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 100\n")
		return untrustedVerdict(untrustedSeen{fault: "untrusted serving cp4", key: "x/v1/ys", entry: "cp1", peer: "cp4", peerID: "apiserver-abc",
			as: []Attempt{attempt(0, 5*time.Millisecond, 200)}, before: start, after: start},
			func() (string, time.Time, error) { return "", time.Time{}, nil })
	}},
	{"rollout.versions", "a control plane's own apiserver still at the older version", func(t *testing.T) promise.Verdict {
		versions := map[string]version.Version{"cp1": version.MustParse("v1.36.3"), "cp2": version.MustParse("v1.35.4")}
		return versionsVerdict("rollout.versions", versions, offVersion(versions, version.MustParse("v1.36.3")))
	}},
	{"rollout.rollback", "a finished rollback left its rollout record", func(t *testing.T) promise.Verdict {
		versions := map[string]version.Version{"cp1": version.MustParse("v1.35.4")}
		err := offVersion(versions, version.MustParse("v1.35.4"))
		if err == nil {
			err = leftRecord(&rollout.Record{From: version.MustParse("v1.35.4"), To: version.MustParse("v1.36.3")}, nil)
		}
		return versionsVerdict("rollout.rollback", versions, err)
	}},
	{"rollout.membership", "a removed control plane still an etcd member and a load-balancer backend", func(t *testing.T) promise.Verdict {
		names := []string{"cp1", "cp2", "cp3"}
		backends := []string{"cp1:6443", "cp2:6443", "cp3:6443"}
		return membershipVerdict("removing cp0", rollout.MembershipDiff(names, backends, []string{"cp0", "cp1", "cp2", "cp3"}, names, append([]string{"cp0:6443"}, backends...)))
	}},
	{"proxy.discovery.converges", "a merged view never showed what only the newer version serves", func(t *testing.T) promise.Verdict {
		only := []discovery.Resource{{Group: "x", Version: "v1", Resource: "ys"}}
		err := wait.Within(t.Context(), wait.Budget{Timeout: 50 * time.Millisecond, Interval: 10 * time.Millisecond}, "every merged view to show x/v1/ys",
			func(context.Context) (bool, string, error) {
				lacking := lacks("cp1", discovery.Set{}, nil, only)
				return len(lacking) == 0, strings.Join(lacking, "; "), nil
			})
		return convergedVerdict(version.MustParse("v1.36.3"), only, 50*time.Millisecond, err)
	}},
	{"rollout.refuses-bad-input", "a rollout two minors up was not refused", func(t *testing.T) promise.Verdict {
		v := refusal("a rollout to v1.37.0 (surge, pause after 0)", "more than one minor", nil, 0)
		if v == nil {
			t.Fatal("judged refused")
		}
		return *v
	}},
	{"rollout.guard.halts", "the guard halted only after the rollout had drained an older control plane", func(t *testing.T) promise.Verdict {
		h := halted()
		h.Steps = append(h.Steps, rollout.Step{Name: "drain cp2", Node: "cp2"})
		return JudgeHalts(h, nil)
	}},
	{"rollout.guard.quiet", "a healthy rollout halted by its guard", func(t *testing.T) promise.Verdict {
		table := quietTable("every control plane to v1.36.3")
		table.Halted, table.HaltedAfter = &report.GuardSignal{Signal: "5xx-share", Requests: 40, Value: "3/40 (7.5%)", Threshold: "<= 1%", Decision: report.GuardBreach}, "join"
		return JudgeQuiet([]report.GuardedRollout{table})
	}},
	{"proxy.load.concurrent", "under eight clients an apiserver, the newer server forwarded lists back: a loop", func(t *testing.T) promise.Verdict {
		l := aBurst(80*time.Millisecond, 20*time.Millisecond)
		l.Rerouted["cp5"] = 12
		return judgeLoad(l, promise.DefaultGuard)
	}},
	{"rollout.discovery.each-step", "a merged discovery still advertised what no apiserver served, past the bound", func(t *testing.T) promise.Verdict {
		table := quietTable("roll back to v1.35.4")
		table.Steps[0].Signals[4].Decision = report.GuardBreach
		table.Steps[0].Signals[4].Value = "timed out after 30s: cp1 still advertises admissionregistration.k8s.io/v1/mutatingadmissionpolicies"
		return JudgeDiscoverySteps([]report.GuardedRollout{table}, converged(0, 0), promise.DefaultGuard)
	}},
	{"rollout.forwarded-objective", "2% of the forwarded requests failed", func(t *testing.T) promise.Verdict {
		return JudgeObjective(forwardedTotals(200, 4, 30*time.Millisecond, 20*time.Millisecond), promise.DefaultGuard, true)
	}},
	{"rollout.interrupted-recovers", "the rollback left a half-joined control plane's container behind", func(t *testing.T) promise.Verdict {
		return recoveredVerdict(nil, "containers cp1,cp2,cp3\n", "containers cp1,cp2,cp3,cp4\n", time.Minute, nil)
	}},
	{"sidecar.start.order", "the app started before its native sidecar on the older kubelet", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeStartOrder(kubelets, false, map[string][]fixtures.Event{"w1": recorded("app start", "proxy start")}, map[string]*corev1.Pod{"w1": {}})
	}},
	{"sidecar.crash.restarts-alone", "the app restarted with its crashing sidecar", func(t *testing.T) promise.Verdict {
		started := metav1.NewTime(sidecarT0)
		pod := &corev1.Pod{Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(sidecarT0.Add(6 * time.Second))}}}}}}
		return sidecarchecks.JudgeCrashAlone(kubelets, map[string]*corev1.Pod{"w1": pod}, map[string]metav1.Time{"w1": started}, nil)
	}},
	{"sidecar.oom.restarts-alone", "the app restarted when its sidecar was killed for memory", func(t *testing.T) promise.Verdict {
		started := metav1.NewTime(sidecarT0)
		killed := &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(sidecarT0.Add(6 * time.Second))}
		pod := &corev1.Pod{Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "hog", RestartCount: 1, LastTerminationState: corev1.ContainerState{Terminated: killed},
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(sidecarT0.Add(7 * time.Second))}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(sidecarT0.Add(7 * time.Second))}}}}}}
		return sidecarchecks.JudgeOOMAlone(kubelets, map[string]*corev1.Pod{"w1": pod}, map[string]metav1.Time{"w1": started})
	}},
	{"sidecar.hung.out-of-service", "the Pod of a hung sidecar left its Service's ready endpoints 40 s after the hang", func(t *testing.T) promise.Verdict {
		hung := sidecarT0.Add(10 * time.Second)
		pod := &corev1.Pod{Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(hung.Add(45 * time.Second))}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(sidecarT0)}}}}}}
		seen := sidecarchecks.HungSeen{In: sidecarT0.Add(5 * time.Second), Out: hung.Add(40 * time.Second), Back: hung.Add(50 * time.Second), Pod: pod, AppStarted: metav1.NewTime(sidecarT0)}
		ev := []fixtures.Event{{At: sidecarT0, Who: "proxy", What: "start"}, {At: hung, Who: "proxy", What: "hang"}, {At: hung.Add(44 * time.Second), Who: "proxy", What: "start"}}
		return sidecarchecks.JudgeHung(kubelets, map[string]sidecarchecks.HungSeen{"w1": seen, "cp1": seen}, map[string][]fixtures.Event{"w1": ev, "cp1": ev})
	}},
	{"sidecar.failure.closed", "a client Pod reached the app at its own port, around its proxy", func(t *testing.T) promise.Verdict {
		urls := sidecarchecks.ClosedURLs{Service: "http://10.96.0.9:8080/", Proxy: "http://10.244.1.7:8080/", App: "http://10.244.1.7:8081/"}
		ev := recorded("proxy start", "proxy ready", "proxy crash", "proxy start", "proxy ready")
		ev = append(ev, fixtures.Event{At: sidecarT0.Add(time.Second), Who: "client", What: fmt.Sprintf("ok %s began=%d", urls.App, sidecarT0.Add(900*time.Millisecond).UnixNano())})
		return sidecarchecks.JudgeFailClosed(kubelets, urls, map[string][]fixtures.Event{"w1": ev, "cp1": ev})
	}},
	{"sidecar.failure.open", "the restarted log agent started from the top: lines shipped twice", func(t *testing.T) promise.Verdict {
		urls := sidecarchecks.OpenURLs{Service: "http://10.96.0.8:8080/", App: "http://10.244.1.9:8080/"}
		ev := recorded("optional-agent start", "app start", "optional-agent crash buffered=2 shipped=2", "optional-agent start")
		ev = append(ev, fixtures.Event{At: sidecarT0.Add(300 * time.Millisecond), Who: "client", What: fmt.Sprintf("ok %s began=%d", urls.App, sidecarT0.Add(250*time.Millisecond).UnixNano())})
		seen := sidecarchecks.OpenSeen{Events: ev, Log: "line 1\nline 2\nline 3\n", Shipped: "line 1\nline 2\nline 1\nline 2\nline 3\n",
			Pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}}
		return sidecarchecks.JudgeFailOpen(kubelets, urls, map[string]sidecarchecks.OpenSeen{"w1": seen, "cp1": seen})
	}},
	{"sidecar.readiness.gates", "the new Pod, its sidecar never ready, a ready endpoint of the Service", func(t *testing.T) promise.Verdict {
		ready := func(name, ip string, ok bool) corev1.Pod {
			st := corev1.ConditionFalse
			if ok {
				st = corev1.ConditionTrue
			}
			return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
		}
		yes := true
		return sidecarchecks.JudgeReadinessGates(&appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: 1}},
			[]corev1.Pod{ready("web-old", "10.244.1.5", true), ready("web-new", "10.244.1.6", false)},
			[]discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
				{Addresses: []string{"10.244.1.6"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}}}})
	}},
	{"sidecar.job.completes", "the Job with a native sidecar failed", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeJobCompletes(kubelets, map[string]*batchv1.Job{"w1": {ObjectMeta: metav1.ObjectMeta{Name: "native-0"}, Status: batchv1.JobStatus{Failed: 1}}})
	}},
	{"sidecar.job.sidecar-crashes", "the Job failed on its sidecar's crashes though its app exited 0", func(t *testing.T) promise.Verdict {
		pod := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", RestartCount: 3}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}}}
		return sidecarchecks.JudgeJobSidecarCrashes(kubelets, map[string]*batchv1.Job{"w1": {Status: batchv1.JobStatus{Failed: 1}}}, map[string][]corev1.Pod{"w1": {pod}})
	}},
	{"sidecar.resources.formula", "the quota charged the native Pod the legacy formula's requests", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeQuotaCharge(t.Context(), true, corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("500m"), corev1.ResourceRequestsMemory: resource.MustParse("160Mi")}, 50*time.Millisecond)
	}},
	{"sidecar.resources.quota-admission", "a quota below the native formula admitted the native Pod", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeQuotaAdmission(nil)
	}},
	{"sidecar.resources.scheduling", "the native Pod bound to a node without the slots its formula asks for", func(t *testing.T) promise.Verdict {
		overCommitted := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "w1"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}
		bound := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "w1"}}
		return sidecarchecks.JudgeScheduling(kubelets, map[string]*corev1.Pod{"w1": overCommitted, "cp1": overCommitted}, map[string]*corev1.Pod{"w1": bound, "cp1": bound})
	}},
	{"sidecar.resources.limits-qos", "a Pod whose limits equal its requests classed Burstable", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeLimits(kubelets, true, map[string]*corev1.Pod{"w1": {Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable}}}, nil)
	}},
	{"sidecar.termination.reverse-order", "the log agent, declared first, told to stop before the proxy", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeReverseOrder(kubelets, map[string]sidecarchecks.Stopped{"w1": {
			Events: recorded("app sigterm lines=150", "log-agent sigterm", "proxy sigterm"), Gone: 2 * time.Second, Shipped: 150}})
	}},
	{"sidecar.termination.bounded-flush", "a backlog larger than the flush budget lost no line: nothing was cut short", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeBoundedFlush(kubelets, map[string]sidecarchecks.Stopped{"w1": {
			Events: recorded("app sigterm lines=1200", "proxy sigterm", "log-agent sigterm"), Gone: 5 * time.Second, Shipped: 1200}})
	}},
	{"sidecar.termination.sigterm-ignored", "a sidecar ignoring SIGTERM held its Pod past the grace period", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeSIGTERMIgnored(kubelets, map[string]sidecarchecks.Stubborn{"w1": {
			Events: recorded("app sigterm lines=100", "proxy sigterm ignored"), Deleted: sidecarT0, Gone: 40 * time.Second, Kept: 100}})
	}},
	{"sidecar.canary.compared", "the native canary lost 40 log lines on deletion where the legacy one lost none", func(t *testing.T) promise.Verdict {
		sec := func(s ...float64) []time.Duration {
			var out []time.Duration
			for _, x := range s {
				out = append(out, time.Duration(x*float64(time.Second)))
			}
			return out
		}
		legacy := sidecarchecks.TemplateSeen{Ready: sec(2, 2, 3, 3), Requests: 160, Written: 2400, MemoryPeak: []int64{30 << 20, 30 << 20, 30 << 20, 30 << 20},
			CPU: sec(0.4, 0.4, 0.4, 0.4), JobsUnfinished: 2}
		native := legacy
		native.Lost, native.Jobs, native.JobsUnfinished = 40, sec(5, 5), 0
		seen := sidecarchecks.CanarySeen{Nodes: []string{"w1", "cp1"}, Pods: 4, Templates: [2]sidecarchecks.TemplateSeen{legacy, native}, ReadinessLooks: sidecarchecks.Looks{Tried: 120, Seen: 120}}
		return sidecarchecks.JudgeCanary(seen, sidecarchecks.CompareCanary(seen))
	}},
	{"sidecar.least-privilege", "the migrated helper ran with effective uid 0", func(t *testing.T) promise.Verdict {
		always, no, yes := corev1.ContainerRestartPolicyAlways, false, true
		pod := &corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: "hardened", AutomountServiceAccountToken: &no,
			InitContainers: []corev1.Container{{Name: sidecarchecks.HelperProxy, RestartPolicy: &always, SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot: &yes, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
			Containers: []corev1.Container{{Name: "app"}}}}
		root := sidecarchecks.Privileges{Container: sidecarchecks.HelperProxy, UID: []string{"65532", "0", "65532", "65532"}, CapEff: "0000000000000000",
			NoNewPrivs: "1", Seccomp: "2", RootReadOnly: true, Mounts: []string{"/"}}
		app := sidecarchecks.Privileges{Container: "app", Mounts: []string{"/", "/var/run/secrets/kubernetes.io/serviceaccount"}}
		on := func(p sidecarchecks.Privileges) map[string]sidecarchecks.Privileges {
			return map[string]sidecarchecks.Privileges{"w1": p, "cp1": p}
		}
		return sidecarchecks.JudgeLeastPrivilege(kubelets, map[string]*corev1.Pod{"w1": pod, "cp1": pod}, on(root), on(app))
	}},
	{"rollout.kubelet-access", "a 1.36 apiserver answered a Pod's log with 403", func(t *testing.T) promise.Verdict {
		return JudgeKubeletAccess("roll every control plane", []KubeletRead{
			{APIServer: "cp1", Node: "w1", Pod: "kube-proxy-a"},
			{APIServer: "cp4", Node: "w1", Pod: "kube-proxy-a", Err: errors.New("Forbidden (user=kube-apiserver-kubelet-client, verb=get, resource=nodes, subresource(s)=[proxy])")}})
	}},
	{"sidecar.eviction.order", "the kubelet evicted the Pod whose native sidecar's request covers its usage first", func(t *testing.T) promise.Verdict {
		seen := sidecarchecks.EvictionSeen{First: "covered", CoveredUsage: 505 << 20, CoveredRequest: 536 << 20, AppRequest: 16 << 20}
		return sidecarchecks.JudgeEvictionOrder(kubelets, map[string]sidecarchecks.EvictionSeen{"w1": seen, "cp1": seen})
	}},
	{"sidecar.network-policy", "a client the policy does not admit reached the native Pod's app port", func(t *testing.T) promise.Verdict {
		targets := []sidecarchecks.Policed{{Template: "native", Port: "proxy", URL: "http://10.244.1.8:8080/"}, {Template: "native", Port: "app", URL: "http://10.244.1.8:8081/"}}
		var open, admitted, stranger []fixtures.Event
		for i := range 5 {
			at := sidecarT0.Add(time.Duration(i) * 100 * time.Millisecond)
			try := func(ok bool, url string) fixtures.Event {
				what := map[bool]string{true: "ok", false: "fail"}[ok]
				return fixtures.Event{At: at, Who: "client", What: fmt.Sprintf("%s %s began=%d", what, url, at.UnixNano())}
			}
			open = append(open, try(true, targets[0].URL), try(true, targets[1].URL))
			admitted = append(admitted, try(true, targets[0].URL), try(false, targets[1].URL))
			stranger = append(stranger, try(false, targets[0].URL), try(true, targets[1].URL))
		}
		seen := sidecarchecks.PolicySeen{Targets: targets, Open: open, Admitted: admitted, Stranger: stranger}
		return sidecarchecks.JudgeNetworkPolicy(kubelets, map[string]sidecarchecks.PolicySeen{"w1": seen, "cp1": seen})
	}},
	{"sidecar.stripped.preflight", "a migration under the stripping webhook went through its batch", func(t *testing.T) promise.Verdict {
		tg := sidecar.Target{Namespace: "ns", Name: "web"}
		return sidecarchecks.JudgeStrippedPreflight(tg, []sidecar.BatchResult{{Targets: []sidecar.Target{tg}, Took: 20 * time.Second}})
	}},
	{"sidecar.stripped.shapes", "a stripped sidecar with a startup probe admitted", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeStrippedShapes(nil)
	}},
	{"sidecar.stripped.old-client", "the old client's write kept the helper a native sidecar: nothing dropped to catch", func(t *testing.T) promise.Verdict {
		always := corev1.ContainerRestartPolicyAlways
		return sidecarchecks.JudgeOldClient(corev1.PodSpec{InitContainers: []corev1.Container{{Name: sidecarchecks.CrashingSidecar, RestartPolicy: &always}},
			Containers: []corev1.Container{{Name: "app"}}})
	}},
	{"sidecar.migration.batches", "the expansion went on past the batch whose helper crashed", func(t *testing.T) promise.Verdict {
		b := func(ns string, restarts int32) sidecar.BatchResult {
			return sidecar.BatchResult{Targets: []sidecar.Target{{Namespace: ns, Name: "web"}}, Took: 15 * time.Second, Restarts: restarts}
		}
		return sidecarchecks.JudgeMigrationBatches([]sidecar.BatchResult{b("a", 0), b("b", 2), b("c", 0)})
	}},
	{"sidecar.migration.rollback", "the rolled-back template lost the helper's port", func(t *testing.T) promise.Verdict {
		legacy := corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app"},
			{Name: sidecarchecks.CrashingSidecar, Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 8080}}}}}}
		after := *legacy.DeepCopy()
		after.Spec.Containers[1].Ports = nil
		return sidecarchecks.JudgeMigrationRollback(sidecar.Target{Namespace: "ns", Name: "web"}, legacy, after)
	}},
	{"sidecar.migration.stop-conditions", "a helper ready only after 15 s did not stop a migration bound to 5 s", func(t *testing.T) promise.Verdict {
		b := func(c string) sidecar.BatchResult {
			return sidecar.BatchResult{Targets: []sidecar.Target{{Namespace: "ns", Name: c}}, Took: 16 * time.Second}
		}
		return sidecarchecks.JudgeStopCondition("ready-latency", "ReadyWithin 5s breached", []sidecar.BatchResult{b("ready-latency"), b("bystander")})
	}},
	{"sidecar.migration.node-replaced", "the batch did not account for the native Pod the drain moved off its worker", func(t *testing.T) promise.Verdict {
		evicted := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "moving-n1", UID: "n1"}, Spec: corev1.PodSpec{NodeName: "w1", InitContainers: []corev1.Container{{Name: "log-agent"}}}}
		after := evicted
		after.Name, after.UID, after.Spec.NodeName = "moving-n2", "n2", "w2"
		return sidecarchecks.JudgeNodeReplaced(sidecarchecks.MovedBatch{Began: sidecarT0, Drained: sidecarT0.Add(5 * time.Second), Old: "w1", New: "w2",
			OnOld: []corev1.Pod{evicted}, Stops: []sidecarchecks.PodStop{{Pod: evicted.Name, Line: "lost 0"}}, After: []corev1.Pod{after},
			Results: []sidecar.BatchResult{{Targets: []sidecar.Target{{Namespace: "ns", Name: "moving"}}, Took: 40 * time.Second}}})
	}},
	{"sidecar.worker-replaced", "on the new worker the app started before the proxy", func(t *testing.T) promise.Verdict {
		return sidecarchecks.JudgeWorkerReplaced("w2", recorded("log-agent start", "app start", "proxy start"))
	}},
}

// TestEveryPromiseCanFail feeds each promise's check the evidence of its
// failure and wants a failure, which the repository's waivers leave a
// failure; then it names every promise of the catalogue with no such
// evidence.
func TestEveryPromiseCanFail(t *testing.T) {
	ws := upstreamWaivers(t)
	has := map[promise.ID]bool{}
	for _, c := range canFail {
		has[c.id] = true
		t.Run(string(c.id)+"/"+c.name, func(t *testing.T) {
			v := c.verdict(t)
			if v.ID != c.id || v.Outcome != promise.Fail {
				t.Fatalf("got %s %s (%s), want %s fail", v.ID, v.Outcome, v.Reason, c.id)
			}
			t.Log(v.Reason)
			if err := v.Validate(); err != nil {
				t.Error(err)
			}
			if w := ws.Apply(v, false); w.Outcome != promise.Fail {
				t.Errorf("the waivers in force make it %s: %s", w.Outcome, w.Reason)
			}
		})
	}
	var missing []string
	for _, p := range promise.Catalogue() {
		if !has[p.ID] {
			missing = append(missing, string(p.ID))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d promise(s) of the catalogue not shown able to fail: %s", len(missing), strings.Join(missing, ", "))
	}
}

// upstreamWaivers are the repository's waivers, in force for a pair
// they all name.
func upstreamWaivers(t *testing.T) promise.Waivers {
	t.Helper()
	root, err := source.Root()
	if err != nil {
		t.Fatal(err)
	}
	ws, err := promise.LoadWaivers(filepath.Join(root, "clusters", "waivers", "upstream.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return ws.For(version.MustParse("v1.35.4"), version.MustParse("v1.36.3"))
}

// byID is the verdict on id among vs.
func byID(t *testing.T, id promise.ID, vs []promise.Verdict) promise.Verdict {
	t.Helper()
	i := slices.IndexFunc(vs, func(v promise.Verdict) bool { return v.ID == id })
	if i < 0 {
		t.Fatalf("no verdict on %s among %v", id, vs)
	}
	return vs[i]
}

// trafficVerdict is the verdict on id of a traffic summary.
func trafficVerdict(t *testing.T, id promise.ID, s traffic.Summary) promise.Verdict {
	return byID(t, id, s.Verdicts())
}

// auditEvent is a final audit event as an entry server logs it.
func auditEvent(id, verb, stage string, code int32, message string) audit.Event {
	return audit.Event{AuditID: types.UID(id), Verb: verb, Stage: auditv1.Stage(stage), RequestURI: "/apis/x/v1/ys",
		ResponseStatus: &metav1.Status{Code: code, Message: message}}
}

// noAudit is an audit log that holds no request.
func noAudit(string) (*audit.Event, error) { return nil, nil }

// parseMetrics is a /metrics scrape in the exposition format.
func parseMetrics(t *testing.T, text string) metrics.Snapshot {
	t.Helper()
	s, err := metrics.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// attempt is a request made at since the probing began, answered with
// code after took.
func attempt(at, took time.Duration, code int) Attempt {
	t0 := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	return Attempt{At: at, Sent: t0.Add(at), Took: took, Code: code}
}

// delivered is a watch that delivered events and ended.
func delivered(events ...string) <-chan string {
	ch := make(chan string, len(events))
	for _, e := range events {
		ch <- e
	}
	close(ch)
	return ch
}

// reroutedAt is a scrape whose rerouted counter for code is n.
func reroutedAt(t *testing.T, code, n int) metrics.Snapshot {
	return parseMetrics(t, fmt.Sprintf("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 100\n"+
		"# TYPE %s counter\n%s{code=\"%d\"} %d\n", rerouted, rerouted, code, n))
}

// notFound is a 404 as a client gets it.
func notFound() error {
	return apierrors.NewNotFound(schema.GroupResource{Group: "x", Resource: "ys"}, "")
}

// trustEvidence is what the trust check sees when every promise holds:
// a reader's list logged alike at both servers, a denied user's
// requests answered 403 and logged by the entry alone.
func trustEvidence() trustSeen {
	reader := authnv1.UserInfo{Username: "system:serviceaccount:ns:reader", UID: "u-1", Groups: []string{"system:serviceaccounts"}}
	nobody := "system:serviceaccount:ns:nobody"
	gr := schema.GroupResource{Group: "x", Resource: "ys"}
	return trustSeen{reader: reader.Username, nobody: nobody, verb: "create", key: "x/v1/ys", entry: "cp1", peers: []string{"cp4"},
		allowedID: "a", peer: "cp4", atPeer: &audit.Event{User: reader}, allowedEntry: &audit.Event{User: reader},
		deny: apierrors.NewForbidden(gr, "", nil), forged: apierrors.NewForbidden(gr, "", nil), deniedID: "d", forgedID: "f",
		deniedEntry: &audit.Event{User: authnv1.UserInfo{Username: nobody}, ResponseStatus: &metav1.Status{Code: 403}},
		forgedEntry: &audit.Event{User: authnv1.UserInfo{Username: nobody}},
		uidHeaders:  func(string) string { return "not set" }}
}

// kubelets are a sidecar run's nodes, one per kubelet version.
var kubelets = []sidecarchecks.Kubelet{{Node: cluster.Node{Name: "w1", Role: cluster.RoleWorker}, Version: "v1.35.4"},
	{Node: cluster.Node{Name: "cp1", Role: cluster.RoleControlPlane}, Version: "v1.36.3"}}

var sidecarT0 = time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)

// recorded is what fixtures record, "who what" each, 100 ms apart.
func recorded(lines ...string) []fixtures.Event {
	var out []fixtures.Event
	for i, l := range lines {
		who, what, _ := strings.Cut(l, " ")
		out = append(out, fixtures.Event{At: sidecarT0.Add(time.Duration(i) * 100 * time.Millisecond), Who: who, What: what})
	}
	return out
}
