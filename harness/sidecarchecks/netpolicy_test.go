package sidecarchecks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// policedTargets are a kubelet's two policed Pods' four addresses.
var policedTargets = []Policed{
	{"legacy", "proxy", "http://10.244.1.7:8080/"}, {"legacy", "app", "http://10.244.1.7:8081/"},
	{"native", "proxy", "http://10.244.1.8:8080/"}, {"native", "app", "http://10.244.1.8:8081/"},
}

// asked is a client's n attempts on each target, ok where reach says.
func asked(n int, reach func(Policed) bool) []fixtures.Event {
	var ev []fixtures.Event
	for i := range n {
		at := t0.Add(time.Duration(i) * policyEvery)
		for _, t := range policedTargets {
			what := "ok "
			if !reach(t) {
				what = "fail "
			}
			ev = append(ev, fixtures.Event{At: at, Who: "client", What: fmt.Sprintf("%s%s began=%d", what, t.URL, at.UnixNano())})
		}
	}
	return ev
}

// policyHeld is the evidence of the policy held: all open before it, the
// admitted client at the proxies only, the stranger nowhere.
func policyHeld() PolicySeen {
	return PolicySeen{Targets: policedTargets,
		Open:     asked(10, func(Policed) bool { return true }),
		Admitted: asked(10, Policed.admits),
		Stranger: asked(5, func(Policed) bool { return false })}
}

func all(Policed) bool { return true }

const refused = "kube-network-policies on w1 could not install its nftables rules: conn.Receive: netlink receive: no such file or directory"

func TestNetworkPolicyJudged(t *testing.T) {
	if v := JudgeNetworkPolicy(testKubelets, onBoth(policyHeld())); v.Outcome != promise.Pass {
		t.Fatalf("the policy held: %s %s", v.Outcome, v.Reason)
	}
	judgeEachCase(t, policyHeld, JudgeNetworkPolicy, []seenCase[PolicySeen]{
		{"the stranger reached the native proxy", func(s *PolicySeen) {
			s.Stranger = asked(5, func(p Policed) bool { return p.Template == "native" && p.Port == "proxy" })
		}, promise.Fail, "does not admit reached the native Pod's proxy port"},
		{"the admitted client reached the native app around its proxy", func(s *PolicySeen) {
			s.Admitted = asked(10, func(p Policed) bool { return p.admits() || p.Template == "native" })
		}, promise.Fail, "reached the native Pod's app port (http://10.244.1.8:8081/), around the proxy"},
		{"the admitted client was refused at the legacy proxy", func(s *PolicySeen) {
			s.Admitted = asked(10, func(p Policed) bool { return p.admits() && p.Template != "legacy" })
		}, promise.Fail, "yet 10 of its 10 attempts failed"},
		{"nothing enforced: the stranger reached all", func(s *PolicySeen) {
			s.Stranger = asked(5, func(Policed) bool { return true })
		}, promise.Fail, "does not admit reached"},
		{"nothing enforced, the engine silent about why", func(s *PolicySeen) {
			s.Admitted, s.Stranger = asked(10, all), asked(10, all)
		}, promise.Fail, "does not admit reached"},
		{"nothing enforced on one node, the engine's rules refused there", func(s *PolicySeen) {
			s.Admitted, s.Stranger, s.Engine = asked(10, all), asked(10, all), refused
		}, promise.Fail, "the nodes are treated unalike"},
		{"the engine's rules refused, yet the stranger kept out: enforced after all", func(s *PolicySeen) {
			s.Engine = refused
			s.Admitted = asked(10, all)
		}, promise.Fail, "around the proxy"},
		{"the app's port was never open", func(s *PolicySeen) {
			s.Open = asked(10, Policed.admits)
		}, promise.Error, "open client never reached the legacy Pod's app port"},
		{"the stranger asked too little", func(s *PolicySeen) {
			s.Stranger = asked(policyFloor-1, func(Policed) bool { return false })
		}, promise.Error, "under the floor"},
		{"nothing asked", func(s *PolicySeen) { *s = PolicySeen{} }, promise.Error, "no policed Pod"},
	})
}

// A cluster whose engine cannot enforce on any node (its rules refused by
// the kernel, as the engine's log says) leaves the promise not
// applicable, with that cause; an engine that logs its refused rules is
// found by the line after the refusal.
func TestNetworkPolicyNotEnforcedAnywhere(t *testing.T) {
	open := policyHeld()
	open.Admitted, open.Stranger, open.Engine = asked(10, all), asked(10, all), refused
	v := JudgeNetworkPolicy(testKubelets, onBoth(open))
	if v.Outcome != promise.NotApplicable || !strings.Contains(v.Reason, "enforces no NetworkPolicy here (kube-network-policies on w1 could not install its nftables rules: conn.Receive") {
		t.Fatalf("got %s %q", v.Outcome, v.Reason)
	}
	log := `I1207 20:53:31.912783       1 controller.go:711] "Syncing nftables rules"
I1207 20:53:31.919929       1 controller.go:925] "syncing nftables rules" error=<
	conn.Receive: netlink receive: no such file or directory
	netlink receive: no such file or directory
 >
`
	if got := rulesRefused(log, "w1"); got != refused {
		t.Errorf("rulesRefused: %q", got)
	}
	if got := rulesRefused(`I1207 20:53:31.912783       1 controller.go:711] "Syncing nftables rules"`, "w1"); got != "" {
		t.Errorf("a sync without an error is no refusal: %q", got)
	}
}
