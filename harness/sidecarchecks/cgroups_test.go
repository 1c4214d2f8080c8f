package sidecarchecks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPodCgroupFindReadsOnlyThePodsOwnFiles runs the command the check
// sends to a node, with this machine's find and grep, over a tree laid out
// as each cgroup driver lays it out on cgroup v1: the Pod's own limits are
// read, its containers' and another Pod's are not, and a directory of
// another Pod that vanishes mid-walk cannot make it fail (it reads no file
// there).
func TestPodCgroupFindReadsOnlyThePodsOwnFiles(t *testing.T) {
	if _, err := exec.LookPath("find"); err != nil {
		t.Skip("no find here:", err)
	}
	const uid = "95a3adcd-bf8a-43c5-b448-d8e57020da07"
	for name, pod := range map[string]string{
		"cgroupfs": "kubelet/kubepods/burstable/pod" + uid,
		"systemd":  "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod95a3adcd_bf8a_43c5_b448_d8e57020da07.slice",
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			write := func(rel, value string) {
				p := filepath.Join(root, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("cpu/"+pod+"/cpu.cfs_quota_us", "20000")
			write("cpu/"+pod+"/cpu.cfs_period_us", "100000")
			write("memory/"+pod+"/memory.limit_in_bytes", "67108864")
			write("cpu/"+pod+"/0123abcd/cpu.cfs_quota_us", "5000")         // a container's
			write("memory/"+pod+"/0123abcd/memory.limit_in_bytes", "1024") // a container's
			write("cpu/kubelet/kubepods/burstable/pod00000000-0000-0000-0000-000000000000/cpu.cfs_quota_us", "1")
			argv := podCgroupFind(root, uid, "cpu.max", "memory.max", "cpu.cfs_quota_us", "cpu.cfs_period_us", "memory.limit_in_bytes")
			out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("find: %v: %s", err, out)
			}
			if got := strings.Count(string(out), "\n"); got != 3 {
				t.Errorf("find printed %d lines, want the Pod's 3 files:\n%s", got, out)
			}
			cg, err := parsePodCgroup(string(out), uid, "w1")
			if err != nil {
				t.Fatal(err)
			}
			if cg.cpu == nil || cg.cpu.MilliValue() != 200 || cg.memory == nil || cg.memory.Value() != 64<<20 {
				t.Errorf("read cpu %v memory %v, want 200m and 64Mi", cg.cpu, cg.memory)
			}
		})
	}
}
