package main

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
)

// routeProtocol marks the routes this program owns, so it removes exactly
// those when their node goes away (and no route someone else made).
const routeProtocol netlink.RouteProtocol = 0x5c

// syncRoutes makes the kernel's routes of routeProtocol equal to want
// (CIDR -> gateway).
func syncRoutes(want map[string]string) error {
	have, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("failed to list routes: %w", err)
	}
	var errs []string
	for _, r := range have {
		if r.Dst == nil {
			continue
		}
		if gw, ok := want[r.Dst.String()]; ok && r.Gw != nil && r.Gw.Equal(net.ParseIP(gw)) {
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			errs = append(errs, fmt.Sprintf("delete %s: %v", r.Dst, err))
		}
	}
	for _, cidr := range sortedCIDRs(want) {
		_, dst, err := net.ParseCIDR(cidr)
		if err != nil {
			continue
		}
		r := &netlink.Route{Dst: dst, Gw: net.ParseIP(want[cidr]), Protocol: routeProtocol}
		if err := netlink.RouteReplace(r); err != nil {
			errs = append(errs, fmt.Sprintf("route %s via %s: %v", cidr, want[cidr], err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to sync routes: %s", strings.Join(errs, "; "))
	}
	return nil
}

// mtuOf returns the MTU of the interface holding ip, else 1500.
func mtuOf(ip string) int {
	links, err := netlink.LinkList()
	if err != nil {
		return 1500
	}
	for _, l := range links {
		addrs, _ := netlink.AddrList(l, netlink.FAMILY_ALL)
		for _, a := range addrs {
			if a.IP.String() == ip {
				return l.Attrs().MTU
			}
		}
	}
	return 1500
}

// masqChain holds the masquerade rules: pod traffic to anything outside the
// cluster's pod subnet leaves with the node's address.
const masqChain = "SKEWER-MASQ"

func ensureMasquerade(podSubnet string) error {
	ipt := func(args ...string) error {
		out, err := exec.Command("iptables", append([]string{"-w", "5", "-t", "nat"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	check := func(args ...string) bool {
		return exec.Command("iptables", append([]string{"-w", "5", "-t", "nat", "-C"}, args...)...).Run() == nil
	}
	_ = ipt("-N", masqChain) // exists already after the first run
	rules := [][]string{
		{masqChain, "-d", podSubnet, "-j", "RETURN"},
		{masqChain, "-m", "addrtype", "--dst-type", "LOCAL", "-j", "RETURN"},
		{masqChain, "-j", "MASQUERADE"},
	}
	for _, r := range rules {
		if !check(r...) {
			if err := ipt(append([]string{"-A"}, r...)...); err != nil {
				return err
			}
		}
	}
	jump := []string{"POSTROUTING", "-s", podSubnet, "-m", "comment", "--comment", "skewer: masquerade pod traffic leaving the cluster", "-j", masqChain}
	if !check(jump...) {
		return ipt(append([]string{"-A"}, jump...)...)
	}
	return nil
}
