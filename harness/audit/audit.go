// Package audit reads the audit logs every apiserver of a skewer cluster
// writes (where they are is the cluster's: cluster.Cluster.AuditLog), as
// the apiserver's own audit event type.
package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Event is one audit event.
type Event = auditv1.Event

// Read returns every event of a JSON-lines audit log that match keeps,
// the backups the apiserver rotated out of it first (Files): a long run's
// accounting starts at the run's beginning, not at the last rotation.
func Read(path string, match func(*Event) bool) ([]Event, error) {
	files, err := Files(path)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, f := range files {
		if out, err = readFile(f, match, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Files are the audit log at path and, before it, the backups the
// apiserver's rotation (--audit-log-maxsize, --audit-log-maxbackup) made
// of it: <name>-<time>.<ext> in the same directory, the time sortable,
// oldest first.
func Files(path string) ([]string, error) {
	ext := filepath.Ext(path)
	backups, err := filepath.Glob(strings.TrimSuffix(path, ext) + "-*" + ext)
	if err != nil {
		return nil, err
	}
	slices.Sort(backups)
	return append(backups, path), nil
}

// readFile appends to out the events of the audit log file at path that
// match keeps.
func readFile(path string, match func(*Event) bool, out []Event) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: not an audit event: %w", path, line, err)
		}
		if match == nil || match(&e) {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// Logged is an event and the audit log it was found in.
type Logged struct {
	Event
	Path string
}

// Server is the apiserver that logged l.
func (l Logged) Server() string { return ServerOf(l.Path) }

// ServerOf is the apiserver whose audit log is at path: a skewer cluster
// keeps each in a directory named after the apiserver's node.
func ServerOf(path string) string { return filepath.Base(filepath.Dir(path)) }

// Final returns, of the audit logs at paths (a missing one is skipped),
// the final events (ResponseComplete or Panic) of each of ids, with the
// log each was found in: one per apiserver that logged the request (two
// for a request the proxy forwarded: the entry server and the peer).
func Final(paths []string, ids []string) (map[string][]Logged, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	out := map[string][]Logged{}
	for _, p := range paths {
		evs, err := Read(p, func(e *Event) bool {
			return want[string(e.AuditID)] && (e.Stage == auditv1.StageResponseComplete || e.Stage == auditv1.StagePanic)
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out[string(e.AuditID)] = append(out[string(e.AuditID)], Logged{Event: e, Path: p})
		}
	}
	return out, nil
}
