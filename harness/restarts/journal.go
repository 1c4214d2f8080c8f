package restarts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/internal/docker"
)

// units are the node services whose restarts the monitor follows, by the
// name systemd gives them.
var units = map[string]string{"kubelet.service": Kubelet, "containerd.service": Containerd}

// systemd's journal message IDs (sd-messages.h): a unit's start job done,
// and a unit's main process exited.
const (
	unitStarted = "39f53479d3a045ac8e11786248231fbf"
	unitExited  = "98e322203f7a4ed290d09fe03c09fe15"
)

// follow starts following the systemd journal of node (a kind node's
// container has the node's name) from since, once per node: a start of
// the kubelet or containerd after the node was Ready is an event. The
// follower ends when the node's container goes or the monitor stops.
func (m *Monitor) follow(node string, since time.Time) {
	m.mu.Lock()
	if m.followed[node] {
		m.mu.Unlock()
		return
	}
	m.followed[node] = true
	m.mu.Unlock()
	m.spawn(func() {
		if err := m.followJournal(node, since); err != nil {
			m.mu.Lock()
			m.journalErrors = append(m.journalErrors, fmt.Sprintf("the journal of %s: %v", node, err))
			m.mu.Unlock()
		}
	})
}

// followJournal runs journalctl -f in the node, as systemd (PID 1) logs
// about the units. The follower inside the node is stopped by closing its
// stdin, so no journalctl outlives the monitor in a cluster that stays.
func (m *Monitor) followJournal(node string, since time.Time) error {
	stdin, closeStdin := io.Pipe()
	ctx, cancel := context.WithCancel(m.logCtx)
	defer cancel()
	go func() {
		<-m.journals.Done()
		closeStdin.Close()
		// A node that does not answer is left after a grace.
		time.AfterFunc(10*time.Second, cancel)
	}()
	args := []string{"journalctl", "--follow", "--output=json", "--no-tail", "--since=" + journalTime(since), "_PID=1"}
	for unit := range units {
		args = append(args, "UNIT="+unit)
	}
	// The journal follows until stdin closes: its arguments are the
	// script's, never pasted into it.
	const script = `"$@" & f=$!; cat >/dev/null; kill $f`
	lines := &lineWriter{line: func(b []byte) { m.journalLine(node, b) }}
	err := docker.ExecStream(ctx, node, stdin, lines, append([]string{"sh", "-c", script, "sh"}, args...)...)
	if m.journals.Err() != nil || strings.Contains(fmt.Sprint(err), "No such container") || strings.Contains(fmt.Sprint(err), "is not running") {
		return nil // stopped, or the node went: everything it logged was read
	}
	return err
}

// exit is how a unit's last process ended, kept per node and unit.
type exit struct {
	code   string
	status int32
	at     time.Time
}

// journalLine reads one journal entry of a node.
func (m *Monitor) journalLine(node string, b []byte) {
	var entry map[string]any
	if json.Unmarshal(b, &entry) != nil {
		return // journalctl's own notices
	}
	field := func(k string) string { s, _ := entry[k].(string); return s }
	kind, ok := units[field("UNIT")]
	if !ok {
		return
	}
	at := time.Now()
	if us, err := strconv.ParseInt(field("__REALTIME_TIMESTAMP"), 10, 64); err == nil {
		at = time.UnixMicro(us)
	}
	key := node + "/" + kind
	switch field("MESSAGE_ID") {
	case unitExited:
		status, _ := strconv.Atoi(field("EXIT_STATUS"))
		m.mu.Lock()
		m.exits[key] = exit{code: field("EXIT_CODE"), status: int32(status), at: at}
		m.mu.Unlock()
	case unitStarted:
		if field("JOB_RESULT") != "done" {
			return
		}
		m.mu.Lock()
		last := m.exits[key]
		m.mu.Unlock()
		e := Event{Kind: kind, Time: at, Node: node, Container: kind, Reason: last.code, ExitCode: last.status}
		if e.Reason == "" {
			e.Reason = "stopped" // stopped by a command, not by its process exiting
		}
		// The old instance's last lines: up to its process's exit, or,
		// stopped by a command, up to the new start.
		until := at
		if !last.at.IsZero() {
			until = last.at.Add(time.Second)
		}
		i := m.add(e)
		m.spawn(func() { m.readUnitLogs(i, node, kind, until) })
	}
}

// readUnitLogs keeps the last lines a unit wrote before until.
func (m *Monitor) readUnitLogs(i int, node, kind string, until time.Time) {
	ctx, cancel := context.WithTimeout(m.logCtx, 10*time.Second)
	defer cancel()
	out, err := docker.Exec(ctx, node, "journalctl", "--output=cat", "--lines="+strconv.Itoa(logLines),
		"--until="+journalTime(until), "_SYSTEMD_UNIT="+kind+".service")
	lines := strings.Split(out, "\n")
	if err != nil {
		lines = []string{"(the unit's log could not be read: " + err.Error() + ")"}
	}
	m.setLogs(i, lines)
}

// kubeletErrorLines is how many of its kubelet's error lines are kept for
// a node that left Ready.
const kubeletErrorLines = 12

// klogError is the head of a klog line at error severity (E1203 10:03:30...).
var klogError = regexp.MustCompile(`^E\d{4} `)

// readKubeletErrors keeps the last error lines the node's kubelet wrote
// in the stretch before it left Ready at at: what it saw of the requests
// that renew its lease and post its status (timeouts, refusals, lost
// connections), which no apiserver may have logged.
func (m *Monitor) readKubeletErrors(i int, node string, at time.Time) {
	ctx, cancel := context.WithTimeout(m.logCtx, 10*time.Second)
	defer cancel()
	out, err := kubeletLog(ctx, node, at.Add(-beforeNotReady), at.Add(time.Second), "cat")
	if err != nil {
		m.setLogs(i, []string{"(the kubelet's log could not be read: " + err.Error() + ")"})
		return
	}
	errs := kubeletErrors(out, kubeletErrorLines)
	m.setLogs(i, errs)
	conns, err := m.readConnections(ctx, node, errs, at)
	if err != nil {
		conns = []string{"(the load balancer's log could not be read: " + err.Error() + ")"}
	}
	m.setConnections(i, conns)
}

// kubeletLog is node's kubelet journal from since to until, in
// journalctl's output format output.
func kubeletLog(ctx context.Context, node string, since, until time.Time, output string) (string, error) {
	return docker.Exec(ctx, node, "journalctl", "--output="+output,
		"--since="+journalTime(since), "--until="+journalTime(until), "_SYSTEMD_UNIT=kubelet.service")
}

// journalTime is t as journalctl's --since and --until read it, to the
// second.
func journalTime(t time.Time) string { return "@" + strconv.FormatInt(t.Unix(), 10) }

// kubeletErrors returns the last n error lines of a kubelet's log, each
// cut to a length a report can show.
func kubeletErrors(log string, n int) []string {
	return lastLines(log, n, klogError.MatchString)
}

// lineWriter hands each complete line written to it to line.
// run.Cmd writes its Log from one goroutine at a time.
type lineWriter struct {
	buf  []byte
	line func([]byte)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}
