package traffic

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/harness/audit"
	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/version"
)

// CausePeerCacheRebuilt is the cause of a false 404 from an apiserver
// that had just rebuilt its peer-discovery cache without the capable
// peer: the proxy rebuilds the whole cache on every identity-Lease event
// and leaves out each peer whose discovery it cannot fetch at that moment
// (k8s.io/apiserver peer_discovery.go), so a request no peer in the cache
// serves falls through to the local handler, which does not serve it.
const CausePeerCacheRebuilt = "peer-cache-rebuilt"

// What an apiserver logs, at the verbosity kubeadm runs it, of a rebuild
// that could not fetch a peer, and of a request that fell through (v1.35;
// from v1.36 the fall-through is logged at -v=3 only).
const (
	rebuildFailed     = "Error syncing discovery for peer lease"
	fetchFailed       = "error querying discovery endpoint for serverID"
	rebuildFetch      = "Proxying request for /api from  to "
	fellThrough       = "is not served by anything in this cluster"
	versionLinePrefix = "] Version: "
)

// fellThroughWithin is how far from a 404 its fall-through line is
// looked for; rebuildTook bounds a rebuild's fetches (tens of ms here):
// one that began longer before a 404 without logging a failure had
// stored its cache by then.
const (
	fellThroughWithin = 5 * time.Second
	rebuildTook       = time.Second
)

// NotFound is one false 404 the traffic met, and what the apiserver that
// answered it logged.
type NotFound struct {
	Record
	// Logged is the apiserver whose audit log holds the 404, Version its
	// version then ("" when its log did not say).
	Logged, Version string
	// FellThrough and Rebuild are its log lines: the request falling
	// through the proxy, and the last rebuild of its peer cache before it
	// that failed to fetch a capable peer - Peer, "node (version)": one
	// newer than the apiserver that answered.
	FellThrough, Rebuild, Peer string
	// Cause is CausePeerCacheRebuilt when the lines show it, else
	// promise.UnknownCause.
	Cause string
}

func (n NotFound) String() string {
	where := "in no audit log"
	if n.Logged != "" {
		where = "answered by " + n.Logged
		if n.Version != "" {
			where += " (" + n.Version + ")"
		}
	}
	var logged []string
	rebuild := n.Rebuild
	if n.Peer != "" {
		rebuild += " (the capable peer " + n.Peer + ")"
	}
	for _, l := range []string{rebuild, n.FellThrough} {
		if l != "" {
			logged = append(logged, l)
		}
	}
	if len(logged) == 0 {
		logged = append(logged, "no line of a peer-cache rebuild that failed to fetch a capable peer, or of a fall-through, near it in its kept log")
	}
	id := n.AuditID
	if id == "" {
		id = "none"
	}
	return fmt.Sprintf("%s %s %s via %s (audit ID %s, phase %q), %s: %s; cause %s",
		n.Time.Format("15:04:05.000"), n.Verb, n.Object, n.Target, id, n.Phase, where, strings.Join(logged, "; then "), n.Cause)
}

// ExplainNotFound gives each false 404 among notFound its cause: events
// are the final audit events by audit ID (the apiserver that answered
// logged it), logs reads what an apiserver logged (cluster's kept log),
// resource is the collection's path. A 404 is CausePeerCacheRebuilt when
// the peer cache its apiserver answered from came from a rebuild that
// could not fetch a peer: the apiserver's last logged rebuild failure
// before it, with no rebuild begun since (its discovery fetches, logged
// at default verbosity) that had time to store a cache - retries stop
// for long stretches, seen for two minutes in place - and the request
// falling through the proxy for the resource within fellThroughWithin;
// from v1.36, where the fall-through is not logged at default verbosity,
// the failed rebuild alone.
func ExplainNotFound(notFound []Record, resource string, events map[string][]audit.Logged, logs func(node string) ([]cluster.LogLine, error), nodes []string) []NotFound {
	name := "Resource=" + path.Base(resource)
	logs = keptOnce(logs)
	peers := capablePeers{logs: logs, byID: map[string]string{}}
	for _, node := range nodes {
		peers.byID[identity(node)] = node
	}
	var out []NotFound
	for _, r := range notFound {
		n := NotFound{Record: r, Cause: promise.UnknownCause}
		for _, e := range events[r.AuditID] {
			if e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusNotFound {
				n.Logged = e.Server()
			}
		}
		if n.Logged == "" {
			out = append(out, n)
			continue
		}
		lines, err := logs(n.Logged)
		if err != nil {
			n.Rebuild = "its kept log could not be read: " + err.Error()
			out = append(out, n)
			continue
		}
		fell := time.Duration(-1) // the nearest fall-through's distance
		var inFlight time.Time    // the last rebuild fetch before the 404
		for _, l := range lines {
			switch {
			case l.Time.After(r.Time.Add(fellThroughWithin)):
			case strings.Contains(l.Text, fellThrough) && strings.Contains(l.Text, name) && l.Time.After(r.Time.Add(-fellThroughWithin)):
				if d := l.Time.Sub(r.Time).Abs(); fell < 0 || d < fell {
					fell, n.FellThrough = d, l.Time.Format("15:04:05.000")+" "+l.Text
				}
			case l.Time.After(r.Time):
			case strings.Contains(l.Text, versionLinePrefix): // a new apiserver: a cache of its own
				n.Version = strings.TrimSpace(l.Text[strings.Index(l.Text, versionLinePrefix)+len(versionLinePrefix):])
				n.Rebuild = ""
			case failedRebuild(l.Text):
				if peer := peers.capable(l, n.Version); peer != "" {
					n.Rebuild, n.Peer = l.Time.Format("15:04:05.000")+" "+l.Text, peer
				}
			case strings.Contains(l.Text, rebuildFetch):
				inFlight = l.Time
				if l.Time.Before(r.Time.Add(-rebuildTook)) {
					n.Rebuild = "" // a rebuild since, done by then, with no failure logged
				}
			}
		}
		if n.Rebuild == "" && !inFlight.IsZero() && !inFlight.Before(r.Time.Add(-rebuildTook)) {
			// A rebuild under way at the 404 stores its cache and then
			// logs that it failed: the line comes just after.
			for _, l := range lines {
				if l.Time.After(r.Time) && !l.Time.After(inFlight.Add(rebuildTook)) && failedRebuild(l.Text) {
					if peer := peers.capable(l, n.Version); peer != "" {
						n.Rebuild, n.Peer = l.Time.Format("15:04:05.000")+" "+l.Text, peer
						break
					}
				}
			}
		}
		if n.Rebuild != "" && (n.FellThrough != "" || fallThroughQuiet(n.Version)) {
			n.Cause = CausePeerCacheRebuilt
		}
		out = append(out, n)
	}
	return out
}

// capablePeers finds, in a failed rebuild's line, the peer it could not
// fetch, by its identity (an apiserver's identity Lease is named from its
// host's name, which in a kind node is the node's), and that peer's
// version then, from its own kept log.
type capablePeers struct {
	logs func(node string) ([]cluster.LogLine, error)
	byID map[string]string // identity -> node
}

// identityRE matches an apiserver identity (its identity Lease's name).
var identityRE = regexp.MustCompile(`apiserver-[a-z2-7]{26}`)

// capable says which peer named in l, a failed rebuild logged by an
// apiserver of version answering, was newer than it then - the one that
// serves what it does not: "node (version)", or "" when none was.
func (p capablePeers) capable(l cluster.LogLine, answering string) string {
	from, err := version.Parse(answering)
	if err != nil {
		return ""
	}
	for _, id := range identityRE.FindAllString(l.Text, -1) {
		node, ok := p.byID[id]
		if !ok {
			continue
		}
		lines, _ := p.logs(node) // unread: no version, not capable
		if _, v := lastVersion(lines, l.Time); v != "" {
			if peer, err := version.Parse(v); err == nil && from.Less(peer) {
				return node + " (" + v + ")"
			}
		}
	}
	return ""
}

// keptOnce is logs reading each node's kept log once: the explanations
// look at one apiserver's log for many requests.
func keptOnce(logs func(node string) ([]cluster.LogLine, error)) func(node string) ([]cluster.LogLine, error) {
	type read struct {
		lines []cluster.LogLine
		err   error
	}
	seen := map[string]read{}
	return func(node string) ([]cluster.LogLine, error) {
		r, ok := seen[node]
		if !ok {
			r.lines, r.err = logs(node)
			seen[node] = r
		}
		return r.lines, r.err
	}
}

// identity is the identity kube-apiserver takes on a host of that name
// (k8s.io/apiserver pkg/server/config.go, v1.35 to v1.37): "apiserver-"
// and the lower-case base32 of the first 16 bytes of the SHA-256 of the
// host name and "kube-apiserver", each with a 2-byte length before it.
func identity(host string) string {
	var b []byte
	for _, s := range []string{host, "kube-apiserver"} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	h := sha256.Sum256(b)
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:16]))
}

// lastVersion is the last start of an apiserver in lines at or before t -
// its Version line - and the version it logged; zero and "" when none.
func lastVersion(lines []cluster.LogLine, t time.Time) (time.Time, string) {
	var at time.Time
	var v string
	for _, l := range lines {
		if i := strings.Index(l.Text, versionLinePrefix); i >= 0 && !l.Time.After(t) {
			at, v = l.Time, strings.TrimSpace(l.Text[i+len(versionLinePrefix):])
		}
	}
	return at, v
}

// failedRebuild says whether an apiserver's log line is a rebuild of its
// peer cache that could not fetch a peer.
func failedRebuild(text string) bool {
	return strings.Contains(text, rebuildFailed) || strings.Contains(text, fetchFailed)
}

// fallThroughQuiet says whether an apiserver of version v logs a request
// falling through the proxy only above default verbosity: from v1.36.
func fallThroughQuiet(v string) bool {
	parsed, err := version.Parse(v)
	return err == nil && (parsed.Major() > 1 || parsed.Minor() >= 36)
}
