package main

import (
	"encoding/json"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, ip string, cidrs ...string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDRs: cidrs},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

func TestConflistUsesThePodCIDR(t *testing.T) {
	b, err := conflist([]string{"10.244.1.0/24"}, 1450)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Plugins []struct {
			Type string
			MTU  int
			IPAM struct {
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Plugins) != 2 || got.Plugins[0].Type != "ptp" || got.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins = %+v, want ptp then portmap", got.Plugins)
	}
	if got.Plugins[0].MTU != 1450 || got.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" {
		t.Fatalf("ptp = %+v", got.Plugins[0])
	}
	if _, err := conflist(nil, 1500); err == nil {
		t.Fatal("a node without a pod CIDR must not get a CNI configuration")
	}
}

func TestNodeRoutesPointAtEveryOtherNode(t *testing.T) {
	nodes := []*corev1.Node{
		node("cp", "172.18.0.2", "10.244.0.0/24"),
		node("w1", "172.18.0.3", "10.244.1.0/24"),
		node("w2", "172.18.0.4"), // no pod CIDR yet
	}
	got := nodeRoutes(nodes, "w1")
	want := map[string]string{"10.244.0.0/24": "172.18.0.2"}
	if len(got) != len(want) || got["10.244.0.0/24"] != want["10.244.0.0/24"] {
		t.Fatalf("routes = %v, want %v", got, want)
	}
}

// TestSyncRoutesInANetworkNamespace programs real routes in a namespace of
// its own: add, move, and remove when a node goes, leaving foreign routes.
func TestSyncRoutesInANetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // also switches this thread into it
	if err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	defer func() { _ = netns.Set(orig); ns.Close() }()

	// A veth pair: this kernel has no dummy links.
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0"}, PeerName: "v1"}); err != nil {
		t.Fatal(err)
	}
	link, _ := netlink.LinkByName("v0")
	addr, _ := netlink.ParseAddr("172.18.0.3/16")
	if err := netlink.AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	_, foreign, _ := net.ParseCIDR("10.99.0.0/24")
	if err := netlink.RouteAdd(&netlink.Route{Dst: foreign, Gw: net.ParseIP("172.18.0.9")}); err != nil {
		t.Fatal(err)
	}
	if got := mtuOf("172.18.0.3"); got != link.Attrs().MTU {
		t.Errorf("mtuOf = %d, want %d", got, link.Attrs().MTU)
	}

	routes := func() map[string]string {
		list, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range list {
			if r.Dst != nil && r.Gw != nil {
				out[r.Dst.String()] = r.Gw.String()
			}
		}
		return out
	}
	steps := []struct {
		want map[string]string
	}{
		{map[string]string{"10.244.0.0/24": "172.18.0.2", "10.244.2.0/24": "172.18.0.4"}},
		{map[string]string{"10.244.0.0/24": "172.18.0.5", "10.244.2.0/24": "172.18.0.4"}}, // node restarted with a new IP
		{map[string]string{"10.244.2.0/24": "172.18.0.4"}},                                // node removed
	}
	for i, s := range steps {
		if err := syncRoutes(s.want); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := routes()
		for cidr, gw := range s.want {
			if got[cidr] != gw {
				t.Errorf("step %d: route %s via %q, want %q (all: %v)", i, cidr, got[cidr], gw, got)
			}
		}
		if len(got) != len(s.want)+1 || got["10.99.0.0/24"] != "172.18.0.9" {
			t.Errorf("step %d: routes %v: want exactly ours plus the foreign one", i, got)
		}
	}
}
