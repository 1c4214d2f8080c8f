// Package audit reads the audit logs every apiserver of a skewer cluster
// writes, as the apiserver's own audit event type.
package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/skewer-k8s/skewer/harness/cluster"
)

// Event is one audit event.
type Event = auditv1.Event

// LogPath is where the host keeps node's audit log.
func LogPath(c *cluster.Cluster, node string) string {
	return filepath.Join(c.Dir, "audit", node, filepath.Base(cluster.AuditLogFile))
}

// Read returns every event of a JSON-lines audit log that match keeps.
func Read(path string, match func(*Event) bool) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open audit log: %w", err)
	}
	defer f.Close()
	var out []Event
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
