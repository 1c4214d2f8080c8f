package nodeimage

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/run"
)

// minorOnly is a version given as MAJOR.MINOR, with or without its v.
var minorOnly = regexp.MustCompile(`^v?(\d+)\.(\d+)$`)

// Patch resolves a version given as MAJOR.MINOR (1.35) to a release of
// that minor, as kind and kubectl take a minor: the newest one whose node
// image is on this machine (no build to wait for), else the newest the Go
// module proxy serves (which a build will take), and says where it was
// found. Anything else than MAJOR.MINOR is not its to read: the zero
// Version, and no error.
func Patch(ctx context.Context, s string) (v version.Version, found string, err error) {
	m := minorOnly.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return version.Version{}, "", nil
	}
	minor := "v" + m[1] + "." + m[2]
	out, err := run.Command("docker", "images", repo, "--format", "{{.Tag}}").String(ctx)
	if err == nil {
		for _, tag := range strings.Fields(out) {
			lv, perr := version.Parse(tag)
			if perr != nil || lv.PreRelease() != "" || !strings.HasPrefix(lv.String(), minor+".") {
				continue // a vendor's build is never a minor's newest release
			}
			if v.IsZero() || v.Less(lv) {
				v = lv
			}
		}
	}
	if !v.IsZero() {
		return v, "the newest node image of " + minor + " here", nil
	}
	// A module query: the newest release of the minor, metadata only.
	raw, err := run.Command("go", "list", "-m", "-json", "k8s.io/kubernetes@"+minor).Output(ctx)
	if err != nil {
		return version.Version{}, "", fmt.Errorf("%s: no node image of %s here, and the Go module proxy serves no release of it: %w", s, minor, err)
	}
	var mod struct{ Version string }
	if err := json.Unmarshal(raw, &mod); err != nil {
		return version.Version{}, "", fmt.Errorf("%s: go list: %w", s, err)
	}
	if v, err = version.Parse(mod.Version); err != nil {
		return version.Version{}, "", err
	}
	return v, "the newest release of " + minor + " the Go module proxy serves", nil
}
