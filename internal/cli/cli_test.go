package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input gets one line naming the problem and a non-zero exit, before
// anything (Docker included) is touched.
func TestUpRejectsBadInputWithOneLine(t *testing.T) {
	dir := t.TempDir()
	malformed := filepath.Join(dir, "bad.yaml")
	os.WriteFile(malformed, []byte("name: x\ncontrolPlanes: [\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--profile", "ha", "--version", "v1.36"}, "invalid Kubernetes version"},
		{[]string{"up", "--profile", "ha", "--control-plane-versions", "v1.35.4,v1.37.2"}, "more than one minor apart"},
		{[]string{"up", "--profile", "ha", "--worker-versions", "v1.36.3"}, "newer than apiserver"},
		{[]string{"up", "--profile", "nosuchprofile"}, `no profile "nosuchprofile"`},
		{[]string{"up", "--profile", malformed}, "malformed profile"},
		{[]string{"up", "--profile", "ha", "--image-source", "registry"}, "invalid image source"},
		{[]string{"up", "--profile", "ha", "--name", "Not_A_Name"}, "invalid cluster name"},
		{[]string{"images", "build"}, "--version is required"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), tc.args, &stdout, &stderr)
			if code == 0 {
				t.Fatalf("exit 0, want failure; stderr %q", stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("stderr %q: want one line containing %q", stderr.String(), tc.want)
			}
		})
	}
}
