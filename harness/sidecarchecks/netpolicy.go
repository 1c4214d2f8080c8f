package sidecarchecks

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/skewer-k8s/skewer/fixtures"
	"github.com/skewer-k8s/skewer/harness/promise"
)

// The Policed Pods: one of each template, a security proxy in front of
// an app that, unlike the guarded Pod's, listens on every address of the
// Pod, so only the NetworkPolicy keeps a client off the app's own port.
// A client asks each address every policyEvery for policyFor, an attempt
// the policy drops ending at policyTimeout: some ten attempts on a
// dropped address, thirty on an open one.
const (
	policedLabel  = "Policed"
	admittedLabel = "role"
	policyEvery   = 100 * time.Millisecond
	policyTimeout = 400 * time.Millisecond
	policyFor     = 3 * time.Second
	// policyFloor is the fewest attempts on an address that judge it.
	policyFloor = 3
)

// CheckNetworkPolicy judges sidecar.network-policy on every kubelet at
// once: a NetworkPolicy that admits only clients labelled role=client,
// and only at the proxy's port, holds alike for the Pod whose proxy is a
// native sidecar and for the legacy Pod. First a client asks all four
// addresses with no policy (each must answer: what the policy later
// refuses was open before it); then, with the policy, an admitted client
// and a stranger ask them at once. The cluster's network plugin enforces
// the policy (skewer's node images run upstream kube-network-policies
// beside the kindnetd stand-in). A policy that changed nothing fails,
// unless the node's engine itself says why it enforces none (engineTrouble):
// then, on every node alike, the promise does not apply here.
func (s *Sidecars) CheckNetworkPolicy(ctx context.Context) promise.Verdict {
	return s.onEachAtOnce(ctx, "sidecar.network-policy", func(ctx context.Context, k Kubelet) ([]string, error) {
		ns, done, err := s.namespace(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer done()
		targets, err := s.policedPods(ctx, ns, k)
		if err != nil {
			return nil, err
		}
		urls := make([]string, len(targets))
		for i, t := range targets {
			urls[i] = t.URL
		}
		flags := []string{"-every", policyEvery.String(), "-timeout", policyTimeout.String(), "-for", policyFor.String()}
		open := podBuilder{image: s.image, ns: ns, name: "open", node: k.Name}
		if err := s.startClient(ctx, open, nil, flags, urls); err != nil {
			return nil, err
		}
		seen := PolicySeen{Targets: targets}
		if seen.Open, err = s.clientEvents(ctx, k, ns, open.name); err != nil {
			return nil, err
		}
		if _, err := s.cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, proxyOnlyPolicy(), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("the NetworkPolicy was refused: %w", err)
		}
		admitted := podBuilder{image: s.image, ns: ns, name: "admitted", node: k.Name}
		stranger := podBuilder{image: s.image, ns: ns, name: "stranger", node: k.Name}
		if err := s.startClient(ctx, admitted, map[string]string{admittedLabel: "client"}, flags, urls); err != nil {
			return nil, err
		}
		if err := s.startClient(ctx, stranger, nil, flags, urls); err != nil {
			return nil, err
		}
		if seen.Engine, err = s.engineTrouble(ctx, k.Name); err != nil {
			return nil, err
		}
		if seen.Admitted, err = s.clientEvents(ctx, k, ns, admitted.name); err != nil {
			return nil, err
		}
		if seen.Stranger, err = s.clientEvents(ctx, k, ns, stranger.name); err != nil {
			return nil, err
		}
		return judgeNetworkPolicy(seen)
	})
}

// Policed is one address of a policed Pod: its template (legacy,
// native), which port (proxy, app), and the URL a client asks.
type Policed struct {
	Template, Port, URL string
}

// admits says whether the policy lets the admitted client reach p.
func (p Policed) admits() bool { return p.Port == "proxy" }

func (p Policed) String() string {
	return "the " + p.Template + " Pod's " + p.Port + " port (" + p.URL + ")"
}

// PolicySeen is what one kubelet's clients recorded asking Targets: the
// open one with no policy, the admitted one and the stranger under it;
// and Engine, what keeps the node's NetworkPolicy engine from enforcing,
// as its own log says ("" when it says nothing of the kind).
type PolicySeen struct {
	Targets                  []Policed
	Open, Admitted, Stranger []fixtures.Event
	Engine                   string
}

// policyEngine is the container of the NetworkPolicy engine skewer's
// node images run in the CNI DaemonSet's Pods (harness/nodeimage).
const policyEngine = "kube-network-policies"

// engineTrouble is what keeps node's NetworkPolicy engine from enforcing:
// none running there, or, from its log, the rules the kernel refused it
// (kube-network-policies sends a policed Pod's new connections to
// userspace with nftables' queue expression; a kernel without nft_queue,
// like this project's CI machines', refuses the whole ruleset). "" when
// the engine runs and logs no such refusal.
func (s *Sidecars) engineTrouble(ctx context.Context, node string) (string, error) {
	pods, err := s.cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Name != policyEngine {
				continue
			}
			tail := int64(400)
			raw, err := s.cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: policyEngine, TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				return "", fmt.Errorf("the log of %s on %s: %w", policyEngine, node, err)
			}
			return rulesRefused(string(raw), node), nil
		}
	}
	return "no NetworkPolicy engine skewer knows (" + policyEngine + ") runs on " + node, nil
}

// rulesRefused is the last refusal of its nftables rules the engine
// logged (its error follows on the next line), "" when none.
func rulesRefused(log, node string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 2; i >= 0; i-- {
		if strings.Contains(lines[i], `"syncing nftables rules" error=`) {
			return fmt.Sprintf("%s on %s could not install its nftables rules: %s", policyEngine, node, strings.TrimSpace(lines[i+1]))
		}
	}
	return ""
}

// PolicedPods runs a Pod of each template on k, Ready, and returns their
// four addresses.
func (s *Sidecars) policedPods(ctx context.Context, ns string, k Kubelet) ([]Policed, error) {
	var out []Policed
	for _, template := range []string{"legacy", "native"} {
		b := podBuilder{image: s.image, ns: ns, name: template, node: k.Name}
		proxy := b.container("proxy", "proxy", "-load-after", "0s", "-upstream", "http://127.0.0.1:8081")
		proxy.ReadinessProbe = readyProbe()
		app := b.container("app", "app", "-serve", ":8081")
		pod := b.pod(nil, []corev1.Container{proxy, app})
		if template == "native" {
			pod = b.pod([]corev1.Container{native(proxy)}, []corev1.Container{app})
		}
		pod.Labels[policedLabel] = "true"
		if _, err := s.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	for _, template := range []string{"legacy", "native"} {
		p, err := s.waitPod(ctx, "certify/sidecar-pod", ns, template, "Ready", podReady)
		if err != nil {
			return nil, err
		}
		out = append(out, Policed{template, "proxy", "http://" + p.Status.PodIP + ":8080/"},
			Policed{template, "app", "http://" + p.Status.PodIP + ":8081/"})
	}
	return out, nil
}

// proxyOnlyPolicy admits to the Policed Pods only clients labelled
// role=client, and only at the proxy's port.
func proxyOnlyPolicy() *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "proxy-only"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{policedLabel: "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{admittedLabel: "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// reached is a client's attempts on one address, and how many it was
// served.
type reached struct{ ok, tried int }

// tallies are a client's attempts on each of targets, by URL.
func tallies(targets []Policed, ev []fixtures.Event) map[string]*reached {
	m := map[string]*reached{}
	for _, t := range targets {
		m[t.URL] = &reached{}
	}
	for _, a := range attempts(ev) {
		if r := m[a.url]; r != nil {
			r.tried++
			if a.ok {
				r.ok++
			}
		}
	}
	return m
}

// enforcedNothing says whether both clients were served on every attempt
// at every address, as if there were no policy.
func enforcedNothing(targets []Policed, clients ...map[string]*reached) bool {
	for _, t := range targets {
		for _, c := range clients {
			if c[t.URL].ok < c[t.URL].tried {
				return false
			}
		}
	}
	return true
}

// judgeNetworkPolicy judges one kubelet's clients: with no policy the
// open client reached every address; with it, the admitted client
// reached each proxy port on every attempt and no app port on any, and
// the stranger reached nothing. Floors: policyFloor attempts by each
// client on each address, and the open client served at each - without
// them a refusal cannot be told from a path never open. Not applicable
// where the policy changed nothing and the node's engine says why.
func judgeNetworkPolicy(seen PolicySeen) ([]string, error) {
	if len(seen.Targets) == 0 {
		return nil, unjudged("no policed Pod's address was asked")
	}
	o, a, st := tallies(seen.Targets, seen.Open), tallies(seen.Targets, seen.Admitted), tallies(seen.Targets, seen.Stranger)
	for _, t := range seen.Targets {
		switch {
		case o[t.URL].ok == 0:
			return nil, unjudged("with no NetworkPolicy the open client never reached %s in %d attempts: a refusal cannot be told from a path never open", t, o[t.URL].tried)
		case a[t.URL].tried < policyFloor || st[t.URL].tried < policyFloor:
			return nil, unjudged("under the NetworkPolicy the clients asked %s only %d and %d times, under the floor of %d", t, a[t.URL].tried, st[t.URL].tried, policyFloor)
		}
	}
	if enforcedNothing(seen.Targets, a, st) && seen.Engine != "" {
		return nil, inapplicable("under the NetworkPolicy every client reached every address, as with none: the cluster enforces no NetworkPolicy here (%s)", seen.Engine)
	}
	var lines []string
	for _, t := range seen.Targets {
		switch {
		case st[t.URL].ok > 0:
			return nil, fmt.Errorf("a client the NetworkPolicy does not admit reached %s in %d of %d attempts", t, st[t.URL].ok, st[t.URL].tried)
		case t.admits() && a[t.URL].ok < a[t.URL].tried:
			return nil, fmt.Errorf("the NetworkPolicy admits the client at %s, yet %d of its %d attempts failed", t, a[t.URL].tried-a[t.URL].ok, a[t.URL].tried)
		case !t.admits() && a[t.URL].ok > 0:
			return nil, fmt.Errorf("the admitted client reached %s, around the proxy the NetworkPolicy confines it to, in %d of %d attempts", t, a[t.URL].ok, a[t.URL].tried)
		}
		lines = append(lines, fmt.Sprintf("%s %s: open %d/%d, admitted %d/%d, stranger %d/%d",
			t.Template, t.Port, o[t.URL].ok, o[t.URL].tried, a[t.URL].ok, a[t.URL].tried, st[t.URL].ok, st[t.URL].tried))
	}
	return []string{"reached/asked, with no NetworkPolicy (open) and with it: " + strings.Join(lines, "; ")}, nil
}
