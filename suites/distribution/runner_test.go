package distribution

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/skewer-k8s/skewer/internal/source"
)

// runner is who runs skewer in a test: a user as a hosted CI runner is
// one - not root, in the docker group, with a home and a skewer cache of
// its own - so what skewer writes and reads back (the audit logs the
// apiservers write as root into the node's bind mount, the evidence it
// exports) is shown readable to such a user.
type runner struct {
	dir  string              // a folder the user owns: put what it runs here
	cred *syscall.Credential // nil: the test's own user, who is not root
	env  []string
}

// nobody is the user a test run as root becomes.
const nobody = 65534

// asRunner is the runner for this test. Not root, the test's own user is
// one. Root drops to nobody with the group of the engine's socket (the
// docker group: what a runner's user is given), a home of its own, and
// a skewer cache that is the machine's, linked file by file: the same
// bytes, readable by all, in folders the user owns - as a runner restores
// its cache. Without a socket such a user could reach, it fails and says
// so: a negative control run as root would hide what a runner meets.
func asRunner(t *testing.T) runner {
	t.Helper()
	g := NewWithT(t)
	dir, err := os.MkdirTemp("", "skewer-runner-")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() != 0 {
		return runner{dir: dir, env: os.Environ()}
	}
	socket := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		socket = strings.TrimPrefix(h, "unix://")
	}
	st, err := os.Stat(socket)
	g.Expect(err).NotTo(HaveOccurred(), "the engine's socket")
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Gid == 0 || st.Mode().Perm()&0o060 != 0o060 {
		t.Fatalf("%s (group %d, mode %v) admits root alone: this test runs skewer as a user in the socket's group, as a hosted runner does - give the socket a group (groupadd docker; dockerd's -G)", socket, sys.Gid, st.Mode().Perm())
	}
	home := filepath.Join(dir, "home")
	cache := filepath.Join(home, ".cache", "skewer")
	g.Expect(os.MkdirAll(cache, 0o755)).To(Succeed())
	mine := source.CacheDir()
	entries, err := os.ReadDir(mine)
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if e.Name() == "clusters" { // clusters' state: each user's own
			continue
		}
		out, err := exec.Command("cp", "-al", filepath.Join(mine, e.Name()), cache).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "linking %s: %s", e.Name(), out)
	}
	g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
	// The folders only: a file's owner is its inode's, the machine's cache's too.
	g.Expect(filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Lchown(path, nobody, nobody)
	})).To(Succeed())
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "HOME", "XDG_CACHE_HOME", "SKEWER_CACHE", "SKEWER_STATE", "USER", "LOGNAME", "KUBECONFIG":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "USER=nobody", "LOGNAME=nobody")
	return runner{dir: dir, env: env, cred: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{sys.Gid}}}
}

// command is cmd run as the runner.
func (r runner) command(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = r.env
	if r.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	}
	return cmd
}

// own makes dir, for the runner to write into.
func (r runner) own(t *testing.T, dir string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	if r.cred != nil {
		g.Expect(os.Chown(dir, int(r.cred.Uid), int(r.cred.Gid))).To(Succeed())
	}
}

// unreadable lists what under dir the runner cannot read (a file) or
// enter (a folder), as find sees it with the runner's own permissions.
func (r runner) unreadable(t *testing.T, dir string) []string {
	t.Helper()
	out, err := r.command(exec.Command("find", dir, "(", "-type", "d", "(", "!", "-readable", "-o", "!", "-executable", ")",
		"-o", "!", "-type", "d", "!", "-readable", ")", "-print")).CombinedOutput()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "find as the runner: %s", out)
	return strings.Fields(string(out))
}

func (r runner) String() string {
	if r.cred == nil {
		return "the test's own user"
	}
	return "nobody in the engine socket's group"
}
