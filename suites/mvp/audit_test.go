package mvp

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/certification"
	"github.com/skewer-k8s/skewer/harness/certify"
)

// completed reads node's audit log and returns, for each of ids, its
// final events: stage ResponseComplete, or Panic - the stage a proxied
// watch ends in at the entry server when its client closes it (the
// reverse proxy aborts its handler).
func completed(t *testing.T, node string, ids map[string]bool) map[string][]audit.Event {
	t.Helper()
	events, err := audit.Read(s.Cluster.AuditLog(node), func(e *audit.Event) bool {
		return (e.Stage == "ResponseComplete" || e.Stage == "Panic") && ids[string(e.AuditID)]
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	out := map[string][]audit.Event{}
	for _, e := range events {
		out[string(e.AuditID)] = append(out[string(e.AuditID)], e)
	}
	return out
}

func idSet(calls []call) map[string]bool {
	ids := map[string]bool{}
	for _, c := range calls {
		ids[c.AuditID] = true
	}
	return ids
}

// completeness is the count of one batch of requests in the audit logs.
type completeness struct {
	sent, atEntry, atPeers int
	missing, duplicate     []string
	byPeer                 map[string]int
	// finals are the entry server's final events of the requests logged
	// once at each side (certification.FinalStages judges them).
	finals []audit.Event
}

func (c completeness) String() string {
	return fmt.Sprintf("%d sent; %d logged at the entry server, %d at the peers %v; %d missing, %d duplicate",
		c.sent, c.atEntry, c.atPeers, c.byPeer, len(c.missing), len(c.duplicate))
}

// expectProxiedAudit checks that every call, sent to entry, was logged once
// at entry and once at exactly one of peers under the same audit ID, with
// user (and the same groups) on both sides - counting all of them. Audit
// events of a watch come when it ends, so it waits up to 30 s for them.
func expectProxiedAudit(t *testing.T, entry server, peers []server, calls []call, user string) completeness {
	t.Helper()
	g := NewWithT(t)
	for _, c := range calls {
		g.Expect(c.AuditID).NotTo(BeEmpty(), "response without an Audit-Id: %s", c)
	}
	ids := idSet(calls)
	var got completeness
	count := func() completeness {
		c := completeness{sent: len(calls), byPeer: map[string]int{}}
		atEntry := completed(t, entry.Name, ids)
		atPeer := map[string][]audit.Event{}
		for _, p := range peers {
			for id, evs := range completed(t, p.Name, ids) {
				atPeer[id] = append(atPeer[id], evs...)
				c.byPeer[p.Name] += len(evs)
			}
		}
		for id := range ids {
			e, p := atEntry[id], atPeer[id]
			c.atEntry += len(e)
			c.atPeers += len(p)
			switch {
			case len(e) == 0 || len(p) == 0:
				c.missing = append(c.missing, id)
			case len(e) > 1 || len(p) > 1:
				c.duplicate = append(c.duplicate, id)
			default:
				c.finals = append(c.finals, e[0])
				g.Expect(e[0].User.Username).To(Equal(user), "user at the entry server, audit ID %s", id)
				g.Expect(p[0].User.Username).To(Equal(user), "user at the peer, audit ID %s", id)
				g.Expect(p[0].User.Groups).To(Equal(e[0].User.Groups), "groups at the peer, audit ID %s", id)
				g.Expect(p[0].SourceIPs).To(ContainElement(entry.IP), "the peer sees the entry server %s as a hop, audit ID %s", entry.IP, id)
			}
		}
		return c
	}
	g.Eventually(func() int {
		got = count()
		return len(got.missing) + len(got.duplicate)
	}).WithTimeout(30*time.Second).WithPolling(time.Second).Should(BeZero(), func() string { return got.String() })
	s.Measured(t, "audit completeness through %s (%s): %s; user %q on both sides", entry.Name, entry.Version, got, user)
	for _, v := range certification.FinalStages(entry.Name, got.finals) {
		if v.Outcome != certify.Skipped { // no watch among the calls
			s.Judge(t, v)
		}
	}
	return got
}

// summarize is "code xN" per code.
func summarize(calls []call) string {
	n := map[int]int{}
	for _, c := range calls {
		n[c.Code]++
	}
	var parts []string
	for code, k := range n {
		parts = append(parts, fmt.Sprintf("%d x%d", code, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func logCalls(t *testing.T, title string, calls []call) {
	var b strings.Builder
	for _, c := range calls {
		b.WriteString("\n  " + c.String())
	}
	t.Logf("%s:%s", title, b.String())
}
