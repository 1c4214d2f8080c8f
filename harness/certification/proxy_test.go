package certification

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/internal/source"
)

// Every sample object the routing check may create is one of the
// resource its path names, and gets a fresh name on each create.
func TestSamplesAreObjectsOfTheirResource(t *testing.T) {
	root, err := source.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "clusters", "samples")
	n := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 3 || !strings.HasSuffix(parts[2], ".yaml") {
			t.Errorf("%s: want samples/<group>/<version>/<resource>.yaml", rel)
			return nil
		}
		r := discovery.Resource{Group: parts[0], Version: parts[1], Resource: strings.TrimSuffix(parts[2], ".yaml")}
		obj, err := sample(r)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if obj.GetAPIVersion() != r.Group+"/"+r.Version || obj.GetKind() == "" {
			t.Errorf("%s: apiVersion %q kind %q, want %s/%s and a kind", rel, obj.GetAPIVersion(), obj.GetKind(), r.Group, r.Version)
		}
		if obj.GetName() != "" || obj.GetGenerateName() == "" {
			t.Errorf("%s: want metadata.generateName and no name, so each create makes a new object", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no sample objects")
	}
	if _, err := sample(discovery.Resource{Group: "nothing.skewer.io", Version: "v1", Resource: "things"}); err == nil {
		t.Error("a sample for a resource with no file")
	}
}
