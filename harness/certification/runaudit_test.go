package certification

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// micro is how the apiserver writes a timestamp.
const micro = "2006-01-02T15:04:05.000000Z07:00"

// auditLogs writes one audit log per server under dir, as kube-apiserver
// writes them (JSON lines), and returns their paths.
type auditLogs struct {
	dir   string
	lines map[string][]logLine
}

// logLine is one event, and its stage timestamp to order the log by.
type logLine struct {
	at   time.Time
	json string
}

func (l *auditLogs) event(server, id, stage string, received, at time.Time) {
	e := map[string]any{"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": id, "stage": stage,
		"verb": "watch", "requestURI": "/apis/example.skewer.io/v1/widgets?watch=true", "user": map[string]any{"username": "system:kube-controller-manager"},
		"requestReceivedTimestamp": received.UTC().Format(micro), "stageTimestamp": at.UTC().Format(micro)}
	b, _ := json.Marshal(e)
	l.lines[server] = append(l.lines[server], logLine{at, string(b)})
}

// alive logs a get every second from from to to: a live server's traffic.
func (l *auditLogs) alive(server string, from, to time.Time) {
	for t := from; !t.After(to); t = t.Add(time.Second) {
		l.event(server, fmt.Sprintf("%s-%d", server, t.Unix()), "ResponseComplete", t, t)
	}
}

func (l *auditLogs) write(t *testing.T) []string {
	var paths []string
	for server, lines := range l.lines {
		p := filepath.Join(l.dir, server, "audit.log")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		// Written in time order, as a server writes them.
		sorted := slices.SortedStableFunc(slices.Values(lines), func(a, b logLine) int { return a.at.Compare(b.at) })
		var b strings.Builder
		for _, line := range sorted {
			b.WriteString(line.json + "\n")
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// The shapes measured in a v1.36.3 -> v1.37.2 surge run: a peer killed
// and a server removed with a forwarded watch open lose that side's final
// stage (server-went-down); a watch open at both at the end is counted,
// not judged; a side that never ends a request while it stays up is not
// explained.
func TestCheckRunAudit(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 17, 44, 0, 0, time.UTC)
	s := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Second))) }
	l := &auditLogs{dir: t.TempDir(), lines: map[string][]logLine{}}
	l.alive("cp2", s(0), s(60))
	l.alive("cp4", s(0), s(20)) // killed at 20.5 s, back at 40 s
	l.alive("cp4", s(40), s(60))
	l.alive("cp", s(0), s(30)) // removed after 30 s
	// Ended at both sides.
	l.event("cp2", "ok", "ResponseComplete", s(1), s(2))
	l.event("cp4", "ok", "ResponseComplete", s(1.1), s(1.9))
	// The peer killed: the entry's reverse proxy aborts, the peer's final is lost.
	l.event("cp2", "killed", "Panic", s(10), s(20.6))
	l.event("cp4", "killed", "ResponseStarted", s(10.1), s(10.2))
	// The entry removed: the peer ends it when the connection goes.
	l.event("cp", "removed", "ResponseStarted", s(25), s(25.1))
	l.event("cp4", "removed", "ResponseStarted", s(25.1), s(25.2))
	// cp4 is down from 20.5 to 40 s: the peer of "removed" is cp2 instead.
	l.lines["cp4"] = l.lines["cp4"][:len(l.lines["cp4"])-1]
	l.event("cp2", "removed", "ResponseStarted", s(25.1), s(25.2))
	l.event("cp2", "removed", "ResponseComplete", s(25.1), s(30.3))
	// Open at both at the end.
	l.event("cp2", "open", "ResponseStarted", s(50), s(50.1))
	l.event("cp4", "open", "ResponseStarted", s(50.1), s(50.2))
	paths := l.write(t)

	v := CheckRunAudit(paths, nil)
	if v.Outcome != promise.Fail || len(v.Causes) != 2 || v.Causes[0] != CauseServerWentDown || v.Causes[1] != CauseServerWentDown {
		t.Fatalf("killed and removed: %+v", v)
	}
	if !strings.Contains(v.Evidence[0], "4 requests forwarded in the run (3 audit logs), 1 ended at both sides, 1 still open at both when the logs end, 2 not ended at a side") {
		t.Errorf("counted: %q", v.Evidence[0])
	}
	if !strings.Contains(v.Evidence[1], "killed watch") || !strings.Contains(v.Evidence[1], "the entry cp2 ended it (Panic at 17:44:20.600); the peer cp4 never did: it went down 10s after it received it (last event 17:44:20.000)") {
		t.Errorf("killed: %q", v.Evidence[1])
	}
	if !strings.Contains(v.Evidence[2], "the entry cp never did: it went down 5s after it received it") {
		t.Errorf("removed: %q", v.Evidence[2])
	}
	if err := v.Validate(); err != nil {
		t.Error(err)
	}

	// A peer that stays up and never ends a request the entry ended.
	l.event("cp2", "half-open", "Panic", s(55), s(56))
	l.event("cp4", "half-open", "ResponseStarted", s(55.1), s(55.2))
	v = CheckRunAudit(l.write(t), nil)
	if v.Outcome != promise.Fail || v.Causes[len(v.Causes)-1] != promise.UnknownCause ||
		!strings.Contains(v.Evidence[len(v.Evidence)-1], "the peer cp4 never did, and was up to the end of the logs") {
		t.Errorf("half-open: %+v", v)
	}

	// The same peer whose apiserver gave way to another soon after (its
	// kubelet replaced it, too soon for its audit log to fall silent): it
	// went down with the request.
	v = CheckRunAudit(l.write(t), map[string][]time.Time{"cp4": {s(45), s(57), s(57.5)}})
	if v.Outcome != promise.Fail || v.Causes[len(v.Causes)-1] != CauseServerWentDown ||
		!strings.Contains(v.Evidence[len(v.Evidence)-1], "the peer cp4 never did: it went down 2s after it received it (last event 17:44:57.000)") {
		t.Errorf("half-open, its peer replaced: %+v", v)
	}

	if v := CheckRunAudit([]string{paths[0]}, nil); v.Outcome != promise.Fail || !strings.HasPrefix(v.Reason, "nothing observed") {
		t.Errorf("one server forwards nothing, and nothing is not a pass: %+v", v)
	}

	// Every forwarded request still open when the logs end: counted, and
	// nothing ended to judge.
	o := &auditLogs{dir: t.TempDir(), lines: map[string][]logLine{}}
	o.alive("cp2", s(0), s(60))
	o.alive("cp4", s(0), s(60))
	o.event("cp2", "open", "ResponseStarted", s(50), s(50.1))
	o.event("cp4", "open", "ResponseStarted", s(50.1), s(50.2))
	if v := CheckRunAudit(o.write(t), nil); v.Outcome != promise.Fail || !strings.HasPrefix(v.Reason, "nothing observed") {
		t.Errorf("only open requests: %+v", v)
	}
}
