package certification

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/skewer-k8s/skewer/harness/promise"
)

// AnswerPromises are what CheckPeerAnswers judges: the peer's own answer,
// refusals included, reaches the client through the proxy unchanged.
var AnswerPromises = []promise.ID{"proxy.route.peer-status", "proxy.route.resource-version"}

// CheckPeerAnswers judges AnswerPromises in the window, from a working
// route: requests the peer refuses, made through the first older
// apiserver and made of the peer itself, and the resourceVersions a
// write and a read see on either side of the hop.
func CheckPeerAnswers(ctx context.Context, w *Window) []promise.Verdict {
	const ns = "default"
	if _, err := w.RouteWorks(ctx, ns); err != nil {
		return erroredAll(AnswerPromises, fmt.Errorf("the proxy never routed the window's resource, so this could not be judged: %w", err))
	}
	entry, err := w.api(w.Old[0], ns)
	if err != nil {
		return erroredAll(AnswerPromises, err)
	}
	peer, err := w.api(w.New[0], ns)
	if err != nil {
		return erroredAll(AnswerPromises, err)
	}
	obj, err := sample(w.Resource)
	if err != nil {
		return erroredAll(AnswerPromises, fmt.Errorf("no sample object of %s (add one at %s): nothing can be written through the proxy without one",
			w.Resource.Key(), samplePath(w.Resource)))
	}
	run := runID()
	w.mark(obj, run, ns)
	return []promise.Verdict{
		CheckPeerStatus(ctx, w, entry, peer, obj.DeepCopy()),
		CheckResourceVersion(ctx, w, entry, peer, obj.DeepCopy(), run),
	}
}

// erroredAll is an error verdict on each of ids, for err.
func erroredAll(ids []promise.ID, err error) []promise.Verdict {
	var vs []promise.Verdict
	for _, id := range ids {
		vs = append(vs, promise.Errored(id, "%v", err))
	}
	return vs
}

// refused is one request the peer refuses, asked through the entry
// server and of the peer itself: what the client of each was answered.
type refused struct {
	what        string
	want        int32
	entry, peer error
}

// CheckPeerStatus judges proxy.route.peer-status: requests for the
// window's resource that its peer refuses - a create of a name that
// exists (409 AlreadyExists), an update from a stale resourceVersion
// (409 Conflict), an invalid name (422 Invalid), a watch from an expired
// resourceVersion (410 Expired) - answer the same through an older
// apiserver as from the peer itself: code, reason and the Status body's
// details (kind, name, each cause), never the entry server's own 404 or
// 503. obj is a sample object of the resource, marked.
func CheckPeerStatus(ctx context.Context, w *Window, entry, peer dynamic.ResourceInterface, obj *unstructured.Unstructured) promise.Verdict {
	const id = "proxy.route.peer-status"
	made, err := peer.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return promise.Errored(id, "create %s on %s itself: %v", w.Resource.Key(), w.New[0].Name, err)
	}
	defer peer.Delete(context.WithoutCancel(ctx), made.GetName(), metav1.DeleteOptions{})
	again := obj.DeepCopy()
	again.SetName(made.GetName())
	invalid := obj.DeepCopy()
	invalid.SetGenerateName("")
	invalid.SetName("Skewer_Not-A-Name")
	// An update that changes nothing writes nothing: the annotation
	// makes made's resourceVersion stale.
	stale, bumped := made.DeepCopy(), made.DeepCopy()
	bumped.SetAnnotations(map[string]string{"skewer.io/bumped": "true"})
	if _, err := peer.Update(ctx, bumped, metav1.UpdateOptions{}); err != nil {
		return promise.Errored(id, "update %s on %s itself, to make %s stale: %v", made.GetName(), w.New[0].Name, made.GetResourceVersion(), err)
	}
	asks := []struct {
		what string
		want int32
		ask  func(dynamic.ResourceInterface) error
	}{
		{"create of a name that exists", 409, func(api dynamic.ResourceInterface) error {
			_, err := api.Create(ctx, again.DeepCopy(), metav1.CreateOptions{})
			return err
		}},
		{"update from a stale resourceVersion", 409, func(api dynamic.ResourceInterface) error {
			_, err := api.Update(ctx, stale.DeepCopy(), metav1.UpdateOptions{})
			return err
		}},
		{"create with an invalid name", 422, func(api dynamic.ResourceInterface) error {
			_, err := api.Create(ctx, invalid.DeepCopy(), metav1.CreateOptions{})
			return err
		}},
		{"watch from an expired resourceVersion (1)", 410, func(api dynamic.ResourceInterface) error { return expiredWatch(ctx, api) }},
	}
	var rs []refused
	for _, a := range asks {
		rs = append(rs, refused{what: a.what, want: a.want, entry: a.ask(entry), peer: a.ask(peer)})
	}
	return peerStatusVerdict(w.Old[0].Name, w.New[0].Name, w.Resource.Key(), rs)
}

// expiredWatch opens a watch of api from resourceVersion 1, long
// compacted out of any watch cache, and returns the error its first
// event carries; a watch that delivers anything else, or nothing in
// 10 s, is said as such.
func expiredWatch(ctx context.Context, api dynamic.ResourceInterface) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	wi, err := api.Watch(wctx, metav1.ListOptions{ResourceVersion: "1", LabelSelector: routeLabel + "=expired"})
	if err != nil {
		return err
	}
	defer wi.Stop()
	ev, ok := <-wi.ResultChan()
	switch {
	case !ok:
		return fmt.Errorf("the watch ended without an event")
	case ev.Type != watch.Error:
		return fmt.Errorf("the watch delivered %s, not an error", ev.Type)
	}
	if st, ok := ev.Object.(*metav1.Status); ok {
		return &apierrors.StatusError{ErrStatus: *st}
	}
	return apierrors.FromObject(ev.Object)
}

// peerStatusVerdict judges proxy.route.peer-status on refusals asked
// through entry and of peer: each must carry a Status the peer itself
// gives (its code the one wanted), and entry's must equal it in code,
// reason and details. A peer that does not refuse as wanted leaves the
// case unjudged: an error, not a pass.
func peerStatusVerdict(entry, peer, key string, rs []refused) promise.Verdict {
	const id = "proxy.route.peer-status"
	var ev []string
	for _, r := range rs {
		ps, ok := status(r.peer)
		if !ok || ps.Code != r.want {
			return promise.Errored(id, "%s of %s on %s itself: %v, want %d: the refusal could not be set up", r.what, key, peer, r.peer, r.want)
		}
		es, ok := status(r.entry)
		switch {
		case !ok:
			return fail(id, "%s of %s through %s: %v, not a Status (%s itself: %d %s)", r.what, key, entry, r.entry, peer, ps.Code, ps.Reason)
		case es.Code != ps.Code || es.Reason != ps.Reason:
			return fail(id, "%s of %s through %s: %d %s, %s itself: %d %s", r.what, key, entry, es.Code, es.Reason, peer, ps.Code, ps.Reason)
		case !sameDetails(es.Details, ps.Details):
			return fail(id, "%s of %s through %s: %d %s with details %s, %s itself gives %s", r.what, key, entry, es.Code, es.Reason, details(es.Details), peer, details(ps.Details))
		}
		ev = append(ev, fmt.Sprintf("%s: %d %s %s", r.what, es.Code, es.Reason, details(es.Details)))
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: []string{
		fmt.Sprintf("%s through %s answered as %s itself: %s", key, entry, peer, strings.Join(ev, "; "))}}
}

// status is the Status body of err, if it carries one.
func status(err error) (metav1.Status, bool) {
	var st apierrors.APIStatus
	if err == nil || !errors.As(err, &st) {
		return metav1.Status{}, false
	}
	return st.Status(), true
}

// sameDetails says whether two Status bodies name the same object and
// the same causes.
func sameDetails(a, b *metav1.StatusDetails) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Group == b.Group && a.Kind == b.Kind && slices.Equal(a.Causes, b.Causes)
}

// details says what a Status body's details name, for the evidence.
func details(d *metav1.StatusDetails) string {
	if d == nil {
		return "(no details)"
	}
	s := fmt.Sprintf("(%s %q", d.Kind, d.Name)
	for _, c := range d.Causes {
		s += fmt.Sprintf(", %s %s", c.Type, c.Field)
	}
	return s + ")"
}
