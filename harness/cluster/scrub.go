package cluster

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// userinfo is the user and password part of a URL (scheme://user:pw@host).
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s"]+@`)

// scrubCredentials rewrites every URL's user and password in the node
// descriptions (inspect.json) under dir as ***: kind copies the host's
// proxy variables (HTTP_PROXY=http://user:secret@proxy:3128) into the
// nodes it makes, and an exported description would publish them with
// the evidence.
func scrubCredentials(dir string) error {
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil // nothing exported to scrub
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "inspect.json" {
			return err
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if clean := userinfo.ReplaceAll(body, []byte("${1}***@")); string(clean) != string(body) {
			return os.WriteFile(path, clean, 0o644)
		}
		return nil
	})
}
