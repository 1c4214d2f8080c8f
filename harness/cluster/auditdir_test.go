package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gopkg.in/natefinch/lumberjack.v2"
)

// The audit logs an apiserver writes, rotated ones too, are readable by
// the user who runs skewer, root or not: the node's folder and log are
// made before its apiserver starts, which then opens the log as
// k8s.io/apiserver does and writes it through the very rotating writer
// (lumberjack, at the apiserver's version) past its size, twice.
func TestAuditLogsReadableByTheUser(t *testing.T) {
	l := layout{t.TempDir()}
	// Folders anyone may pass, as a home's and skewer's state's are, so
	// that reading the files below is up to their own mode.
	for _, d := range []string{l.dir, filepath.Dir(l.dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const node = "c-control-plane"
	if err := l.makeAuditDir(node); err != nil {
		t.Fatal(err)
	}
	// Again, as a node of the same name started anew: the log is kept.
	if err := l.makeAuditDir(node); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(l.auditDir(node), filepath.Base(AuditLogFile))
	// The apiserver's start: ensureLogFile.
	f, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	w := &lumberjack.Logger{Filename: log, MaxSize: 1, MaxBackups: 5}
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for i := 0; i < 2*1024+10; i++ { // a little past 2 MB: two rotations
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(l.auditDir(node), "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("%d files after two rotations, want the log and two backups: %v", len(files), files)
	}
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if mode := info.Mode().Perm(); mode != 0o644 {
			t.Errorf("%s: mode %v, want 0644", filepath.Base(f), mode)
		}
		if uid := info.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Getuid() {
			t.Errorf("%s: owned by %d, not by the user who ran skewer (%d)", filepath.Base(f), uid, os.Getuid())
		}
		if os.Getuid() != 0 {
			continue
		}
		// Read by a user who is not root (nobody), as a CI runner's is.
		cat := exec.Command("cat", f)
		cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cat.Output(); err != nil || len(out) == 0 {
			t.Errorf("%s: not readable by a user who is not root: %v", filepath.Base(f), err)
		}
	}
}
