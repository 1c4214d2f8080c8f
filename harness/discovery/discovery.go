// Package discovery reads an apiserver's aggregated discovery (/apis, v2)
// as a set of resources, and compares two servers': what the newer one
// of a pair serves and the older does not is what the Mixed Version Proxy
// must route, found for any pair rather than named in a check.
package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/client-go/kubernetes"
)

// The Accept headers of the two views an apiserver gives of /apis: merged
// with what its peers serve (the proxy's view), and its own alone.
const (
	acceptMerged = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	acceptLocal  = acceptMerged + ";profile=nopeer"
)

// Resource is one resource of one group version.
type Resource struct {
	Group, Version, Resource string
	// Kind is the kind of the resource's objects (discovery's responseKind).
	Kind       string
	Namespaced bool
	Verbs      []string
}

// Key is group/version/resource, the form reports use.
func (r Resource) Key() string { return r.Group + "/" + r.Version + "/" + r.Resource }

// Path is the collection's URL path.
func (r Resource) Path() string { return "/apis/" + r.Group + "/" + r.Version + "/" + r.Resource }

// Set is the resources one server's discovery lists, by Key.
type Set map[string]Resource

// Local reads what the apiserver cs talks to serves itself.
func Local(ctx context.Context, cs kubernetes.Interface) (Set, error) {
	return read(ctx, cs, acceptLocal)
}

// Merged reads what it lists with its peers' resources merged in.
func Merged(ctx context.Context, cs kubernetes.Interface) (Set, error) {
	return read(ctx, cs, acceptMerged)
}

func read(ctx context.Context, cs kubernetes.Interface, accept string) (Set, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", accept).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read /apis: %w", err)
	}
	return Parse(raw)
}

// Parse reads an APIGroupDiscoveryList. Subresources are not resources of
// their own here: a check routes the collection.
func Parse(raw []byte) (Set, error) {
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("/apis is not an APIGroupDiscoveryList: %w", err)
	}
	if list.Kind != "APIGroupDiscoveryList" {
		return nil, fmt.Errorf("/apis answered a %q, not an APIGroupDiscoveryList (aggregated discovery off?)", list.Kind)
	}
	out := Set{}
	for _, g := range list.Items {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				res := Resource{Group: g.Name, Version: v.Version, Resource: r.Resource,
					Namespaced: r.Scope == apidiscoveryv2.ScopeNamespace, Verbs: slices.Sorted(slices.Values(r.Verbs))}
				if r.ResponseKind != nil {
					res.Kind = r.ResponseKind.Kind
				}
				out[res.Key()] = res
			}
		}
	}
	return out, nil
}

// allVerbs are what a routing check exercises.
var allVerbs = []string{"create", "delete", "get", "list", "update", "watch"}

// OnlyIn lists what newer serves and older does not, the resources a
// Mixed Version Proxy must route from the older server. Those with every
// verb a routing check needs come first, then by key, so the first is the
// one to check and the order is the same every run.
func OnlyIn(newer, older Set) []Resource {
	var out []Resource
	for k, r := range newer {
		if _, ok := older[k]; !ok {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Routable(), out[j].Routable()
		if a != b {
			return a
		}
		return out[i].Key() < out[j].Key()
	})
	return out
}

// Routable says the resource has every verb a routing check exercises.
func (r Resource) Routable() bool {
	for _, v := range allVerbs {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	return true
}

func (r Resource) String() string {
	return fmt.Sprintf("%s (%s)", r.Key(), strings.Join(r.Verbs, ","))
}
