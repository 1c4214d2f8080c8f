package certification

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// seenRV is one request of CheckResourceVersion: what it was, the
// resourceVersion it answered with, whether it wrote, and how it failed.
type seenRV struct {
	what  string
	rv    string
	write bool
	err   error
}

// CheckResourceVersion judges proxy.route.resource-version: a
// resourceVersion never goes backwards across the hop. An object of the
// window's resource is created on the peer itself; a consistent list
// through an older apiserver then answers at or after that write and
// holds the object; a patch through the older apiserver writes after the
// list; a watch through it from the list's resourceVersion delivers that
// patch and nothing before it; the peer itself then reads at or after
// the patch. Versions are ordered as numbers, as etcd's revisions, which
// every version of the pair stores them as. obj is a sample object of
// the resource, marked with run.
func CheckResourceVersion(ctx context.Context, w *Window, entry, peer dynamic.ResourceInterface, obj *unstructured.Unstructured, run string) promise.Verdict {
	const id = "proxy.route.resource-version"
	through, on := "through "+w.Old[0].Name, "on "+w.New[0].Name+" itself"
	made, err := peer.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return promise.Errored(id, "create %s %s: %v", w.Resource.Key(), on, err)
	}
	name := made.GetName()
	defer peer.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	seen := []seenRV{{what: "create " + on, rv: made.GetResourceVersion(), write: true}}
	selector := metav1.ListOptions{LabelSelector: routeLabel + "=" + run}
	l, err := entry.List(ctx, selector)
	listed := seenRV{what: "consistent list " + through, err: err}
	if err == nil {
		listed.rv = l.GetResourceVersion()
		if len(l.Items) != 1 || l.Items[0].GetName() != name {
			listed.err = fmt.Errorf("%d objects, not the one %s made", len(l.Items), w.New[0].Name)
		}
	}
	if seen = append(seen, listed); listed.err != nil {
		return rvVerdict(w.Resource.Key(), seen)
	}
	wctx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	selector.ResourceVersion = listed.rv
	wi, err := entry.Watch(wctx, selector)
	if err != nil {
		return rvVerdict(w.Resource.Key(), append(seen, seenRV{what: "watch " + through + " from " + listed.rv, err: err}))
	}
	defer wi.Stop()
	p, err := entry.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"skewer.io/patched":"true"}}}`), metav1.PatchOptions{})
	patched := seenRV{what: "patch " + through, write: true, err: err}
	if err == nil {
		patched.rv = p.GetResourceVersion()
	}
	if seen = append(seen, patched); err != nil {
		return rvVerdict(w.Resource.Key(), seen)
	}
	seen = append(seen, firstEvent(wi, "watch "+through+" from "+listed.rv, name))
	got, err := peer.Get(ctx, name, metav1.GetOptions{})
	read := seenRV{what: "get " + on, err: err}
	if err == nil {
		read.rv = got.GetResourceVersion()
	}
	return rvVerdict(w.Resource.Key(), append(seen, read))
}

// firstEvent is what the watch wi, named what, first delivered: a
// MODIFIED of name, or an error saying what came instead.
func firstEvent(wi watch.Interface, what, name string) seenRV {
	s := seenRV{what: what}
	for ev := range wi.ResultChan() {
		if ev.Type == watch.Bookmark {
			continue
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Modified || !ok || u.GetName() != name {
			s.err = fmt.Errorf("first delivered %s %T, not the patch of %s", ev.Type, ev.Object, name)
			return s
		}
		s.rv = u.GetResourceVersion()
		return s
	}
	s.err = fmt.Errorf("ended in 20s without delivering the patch of %s", name)
	return s
}

// rvVerdict judges proxy.route.resource-version on the requests seen, in
// the order they were made: none failed, each answered at or after every
// one before it, and each write after every one before it.
func rvVerdict(key string, seen []seenRV) promise.Verdict {
	const id = "proxy.route.resource-version"
	var said []string
	var last uint64
	for i, s := range seen {
		if s.err != nil {
			return fail(id, "%s of %s, after %s: %v", s.what, key, strings.Join(said, ", "), s.err)
		}
		rv, err := strconv.ParseUint(s.rv, 10, 64)
		if err != nil {
			return promise.Errored(id, "%s of %s answered resourceVersion %q, not a number: this storage's versions cannot be ordered", s.what, key, s.rv)
		}
		switch {
		case i > 0 && rv < last:
			return fail(id, "%s of %s answered resourceVersion %d, before %d that %s had seen: it went backwards", s.what, key, rv, last, seen[i-1].what)
		case i > 0 && s.write && rv == last:
			return fail(id, "%s of %s wrote at resourceVersion %d, not after what %s had seen", s.what, key, rv, seen[i-1].what)
		}
		last = rv
		said = append(said, fmt.Sprintf("%s %d", s.what, rv))
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{key + ": " + strings.Join(said, ", ")}}
}
