package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// SaveAs writes the host's image ref as a docker-archive tar to path, in
// which the image is named as instead: what a node imports from it is
// known there by that name only, while the host keeps ref. Skewer builds
// the images kubeadm asks for (registry.k8s.io/kube-apiserver:v1.36.3)
// under names of its own on the host, so none shadows a user's image.
func SaveAs(ctx context.Context, ref, as, path string) error {
	tmp := path + ".save"
	defer os.Remove(tmp)
	if err := Save(ctx, ref, tmp); err != nil {
		return err
	}
	return RenameInArchive(tmp, path, ref, as)
}

// RenameInArchive copies the docker-archive tar src to dst with the image
// named from renamed to, wherever docker save records a name: manifest.json's
// RepoTags, the legacy repositories file and, from Docker 25 on, the OCI
// index's image name annotation. It fails if src never names from.
func RenameInArchive(src, dst, from, to string) error {
	fromRepo, fromTag, ok := splitRef(from)
	toRepo, toTag, ok2 := splitRef(to)
	if !ok || !ok2 {
		return fmt.Errorf("rename %s to %s in an image archive: both need a tag", from, to)
	}
	renames := map[string]func([]byte) ([]byte, bool, error){
		"manifest.json": func(b []byte) ([]byte, bool, error) { return renameManifest(b, from, to) },
		"repositories":  func(b []byte) ([]byte, bool, error) { return renameRepositories(b, fromRepo, fromTag, toRepo, toTag) },
		"index.json":    func(b []byte) ([]byte, bool, error) { return renameIndex(b, from, to) },
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(dst + ".tmp")
	defer out.Close()
	renamed, err := copyArchive(tar.NewReader(in), tar.NewWriter(out), renames)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if !renamed {
		return fmt.Errorf("%s does not name %s", src, from)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}

// copyArchive copies every entry of tr to tw, the files edit names
// through their edit, and closes tw; it says whether any edit changed
// something.
func copyArchive(tr *tar.Reader, tw *tar.Writer, edit map[string]func([]byte) ([]byte, bool, error)) (bool, error) {
	changed := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return changed, tw.Close()
		}
		if err != nil {
			return false, err
		}
		fn, ok := edit[h.Name]
		if !ok {
			if err := tw.WriteHeader(h); err != nil {
				return false, err
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return false, err
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return false, err
		}
		b, did, err := fn(b)
		if err != nil {
			return false, fmt.Errorf("%s: %w", h.Name, err)
		}
		changed = changed || did
		h.Size = int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			return false, err
		}
		if _, err := tw.Write(b); err != nil {
			return false, err
		}
	}
}

// splitRef splits name:tag at the tag's colon (a registry's port is
// before the last slash).
func splitRef(ref string) (repo, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

func renameManifest(b []byte, from, to string) ([]byte, bool, error) {
	var m []map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, false, err
	}
	did := false
	for _, image := range m {
		var tags []string
		if raw, ok := image["RepoTags"]; ok {
			if err := json.Unmarshal(raw, &tags); err != nil {
				return nil, false, err
			}
		}
		for i, t := range tags {
			if t == from {
				tags[i], did = to, true
			}
		}
		raw, err := json.Marshal(tags)
		if err != nil {
			return nil, false, err
		}
		image["RepoTags"] = raw
	}
	b, err := json.Marshal(m)
	return b, did, err
}

func renameRepositories(b []byte, fromRepo, fromTag, toRepo, toTag string) ([]byte, bool, error) {
	var repos map[string]map[string]string
	if err := json.Unmarshal(b, &repos); err != nil {
		return nil, false, err
	}
	id, ok := repos[fromRepo][fromTag]
	if !ok {
		return b, false, nil
	}
	delete(repos[fromRepo], fromTag)
	if len(repos[fromRepo]) == 0 {
		delete(repos, fromRepo)
	}
	if repos[toRepo] == nil {
		repos[toRepo] = map[string]string{}
	}
	repos[toRepo][toTag] = id
	b, err := json.Marshal(repos)
	return b, true, err
}

// imageNameAnnotation is where an OCI index written by docker save (25+)
// and read by containerd's import names an image.
const imageNameAnnotation = "io.containerd.image.name"

func renameIndex(b []byte, from, to string) ([]byte, bool, error) {
	var index map[string]json.RawMessage
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, false, err
	}
	var manifests []map[string]any
	if raw, ok := index["manifests"]; ok {
		if err := json.Unmarshal(raw, &manifests); err != nil {
			return nil, false, err
		}
	}
	did := false
	for _, m := range manifests {
		if a, ok := m["annotations"].(map[string]any); ok && a[imageNameAnnotation] == from {
			a[imageNameAnnotation], did = to, true
		}
	}
	raw, err := json.Marshal(manifests)
	if err != nil {
		return nil, false, err
	}
	index["manifests"] = raw
	b, err = json.Marshal(index)
	return b, did, err
}
