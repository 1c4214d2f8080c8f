package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/source"
)

// givenFlags are where node images come from: skewer's own builds, or
// what a user brings instead - a node image used as it is, or a
// Kubernetes release (tarball or directory of binaries) built into one.
type givenFlags struct {
	source     string
	nodeImages map[string]string
	kubernetes map[string]string
}

// add registers the flags; keys names what a key may say besides a
// version (e.g. "from=, to="), for the help text.
func (g *givenFlags) add(fl *pflag.FlagSet, keys string) {
	fl.StringVar(&g.source, "image-source", "build", "where skewer's own node images come from: build (local, else built offline) or local (never built)")
	fl.StringToStringVar(&g.nodeImages, "node-image", nil, "a node image of your own, used as it is: "+keys+"VERSION=REF (its version is read from the image)")
	fl.StringToStringVar(&g.kubernetes, "kubernetes", nil, "a Kubernetes build of your own, made into a node image: "+keys+"VERSION=PATH, PATH a server release tarball (kubernetes/server/bin/...), a directory of its binaries, or a source tree (a git checkout of k8s.io/kubernetes, built here); its version is what the binaries report, or git describe for a tree")
}

// resolver reads every given image and release and returns the resolver
// that hands them out. sides are the keys that stand for a flag of the
// command ("to" for --to) with the version that flag says (zero when it
// is unset): the version read must be the flag's, and the returned map
// says what each side given stands for. Nothing is built here: a release
// is read (a tarball unpacked once into the cache) and its binaries asked
// their version.
func (g *givenFlags) resolver(ctx context.Context, out io.Writer, sides map[string]version.Version) (*nodeimage.Resolver, map[string]version.Version, error) {
	src, err := nodeimage.ParseSource(g.source)
	if err != nil {
		return nil, nil, err
	}
	r := &nodeimage.Resolver{Source: src, Out: out, Given: map[version.Version]string{}, Releases: map[version.Version]*nodeimage.Release{}}
	chosen := map[string]version.Version{}
	take := func(flag, key, what string, v version.Version) error {
		prefix := fmt.Sprintf("--%s %s=%s", flag, key, what)
		if want, ok := sides[key]; ok {
			switch {
			case !want.IsZero() && want != v:
				return fmt.Errorf("%s carries %s, but --%s says %s", prefix, v, key, want)
			case !chosen[key].IsZero():
				return fmt.Errorf("%s: %s is given twice", prefix, key)
			}
			chosen[key] = v
		} else {
			kv, err := version.Parse(key)
			if err != nil {
				return fmt.Errorf("%s: the key is %sa version: %w", prefix, sideNames(sides), err)
			}
			if kv != v {
				return fmt.Errorf("%s: it carries %s", prefix, v)
			}
		}
		_, image := r.Given[v]
		if _, release := r.Releases[v]; image || release {
			return fmt.Errorf("%s: %s is given twice", prefix, v)
		}
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(g.nodeImages)) {
		ref := g.nodeImages[key]
		v, err := nodeimage.ImageVersion(ctx, ref)
		if err != nil {
			return nil, nil, fmt.Errorf("--node-image %s=%s: %w", key, ref, err)
		}
		if err := take("node-image", key, ref, v); err != nil {
			return nil, nil, err
		}
		r.Given[v] = ref
	}
	for _, key := range slices.Sorted(maps.Keys(g.kubernetes)) {
		path := g.kubernetes[key]
		rel, err := nodeimage.OpenRelease(ctx, path, source.CacheDir())
		if err != nil {
			return nil, nil, fmt.Errorf("--kubernetes %s=%s: %w", key, path, err)
		}
		if err := take("kubernetes", key, path, rel.Version); err != nil {
			return nil, nil, err
		}
		r.Releases[rel.Version] = rel
	}
	return r, chosen, nil
}

// sideNames lists the side keys for an error: "from, to or ".
func sideNames(sides map[string]version.Version) string {
	if len(sides) == 0 {
		return ""
	}
	return strings.Join(slices.Sorted(maps.Keys(sides)), ", ") + " or "
}
