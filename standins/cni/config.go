package main

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// conflist is the CNI configuration for this node's pod CIDRs: ptp veths
// with host-local addresses, and portmap for hostPorts - what kindnetd writes.
func conflist(podCIDRs []string, mtu int) ([]byte, error) {
	if len(podCIDRs) == 0 {
		return nil, fmt.Errorf("node has no pod CIDR yet")
	}
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, cidr := range podCIDRs {
		ip, _, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("invalid pod CIDR %q: %w", cidr, err)
		}
		ranges = append(ranges, []map[string]string{{"subnet": cidr}})
		if ip.To4() != nil {
			routes = append(routes, map[string]string{"dst": "0.0.0.0/0"})
		} else {
			routes = append(routes, map[string]string{"dst": "::/0"})
		}
	}
	cfg := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kindnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    mtu,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  routes,
					"ranges":  ranges,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// nodeRoutes maps every other node's pod CIDRs to that node's internal IP of
// the same family.
func nodeRoutes(nodes []*corev1.Node, self string) map[string]string {
	routes := map[string]string{}
	for _, n := range nodes {
		if n.Name == self {
			continue
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, cidr := range cidrs {
			ip, _, err := net.ParseCIDR(cidr)
			if err != nil {
				continue
			}
			if gw := internalIP(n, ip.To4() != nil); gw != "" {
				routes[cidr] = gw
			}
		}
	}
	return routes
}

func internalIP(n *corev1.Node, v4 bool) string {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address); ip != nil && (ip.To4() != nil) == v4 {
			return a.Address
		}
	}
	return ""
}

func podCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

func sortedCIDRs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
