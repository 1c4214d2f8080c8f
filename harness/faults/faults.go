// Package faults injects the faults the suites reason about into a real
// cluster and takes them out again: a peer link black-holed, an apiserver
// stopped, an apiserver restarted with other flags. Each Fault is injected
// and reverted by the caller, who defers Revert right after Inject; a
// Revert of a fault never injected does nothing.
//
// This machine's kernel has no netem (../shared/env/README.md), so a link
// is black-holed with iptables in the sender's network namespace, which
// every kind node has (nodes are privileged containers), and slowed by a
// userspace relay (./relay) the sender's connections are redirected to.
package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// Fault is one injectable fault.
type Fault interface {
	// Name says what the fault does, for logs and reports.
	Name() string
	Inject(ctx context.Context, c *cluster.Cluster) error
	Revert(ctx context.Context, c *cluster.Cluster) error
}

// BlackHole drops, in From's network namespace, every TCP packet From
// sends to To's apiserver port: connections from From's apiserver to To's
// hang without an answer, as across a dead link. Nothing else of From's or
// To's traffic is touched.
type BlackHole struct {
	From, To cluster.Node
	rule     []string
}

func (b *BlackHole) Name() string {
	return fmt.Sprintf("black hole %s -> %s:%d", b.From.Name, b.To.Name, cluster.APIServerPort)
}

func (b *BlackHole) Inject(ctx context.Context, _ *cluster.Cluster) error {
	ip, err := b.To.IP()
	if err != nil {
		return err
	}
	rule := []string{"OUTPUT", "-d", ip, "-p", "tcp", "--dport", fmt.Sprint(cluster.APIServerPort), "-j", "DROP"}
	if _, err := b.From.Run(ctx, append([]string{"iptables", "-I"}, rule...)...); err != nil {
		return fmt.Errorf("%s: %w", b.Name(), err)
	}
	b.rule = rule
	return nil
}

func (b *BlackHole) Revert(ctx context.Context, _ *cluster.Cluster) error {
	if b.rule == nil {
		return nil
	}
	if _, err := b.From.Run(ctx, append([]string{"iptables", "-D"}, b.rule...)...); err != nil {
		return fmt.Errorf("revert %s: %w", b.Name(), err)
	}
	b.rule = nil
	return nil
}

// All is several faults held together: injected in order, reverted in
// reverse, and a revert goes on past one that fails.
type All []Fault

func (a All) Name() string {
	var names []string
	for _, f := range a {
		names = append(names, f.Name())
	}
	return strings.Join(names, "; ")
}

func (a All) Inject(ctx context.Context, c *cluster.Cluster) error {
	for _, f := range a {
		if err := f.Inject(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func (a All) Revert(ctx context.Context, c *cluster.Cluster) error {
	var errs []error
	for i := len(a) - 1; i >= 0; i-- {
		errs = append(errs, a[i].Revert(ctx, c))
	}
	return errors.Join(errs...)
}
