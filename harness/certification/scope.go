package certification

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/discovery"
	"github.com/skewer-k8s/skewer/harness/promise"
	"github.com/skewer-k8s/skewer/harness/wait"
)

// The CRD and the APIService CheckScope makes: a group only the cluster's
// own extension servers serve, and one whose backend does not exist.
const (
	scopeCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.certify.skewer.io"},
 "spec":{"group":"certify.skewer.io","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	scopeAPIService = `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
 "metadata":{"name":"v1.certify-agg.skewer.io"},
 "spec":{"group":"certify-agg.skewer.io","version":"v1","groupPriorityMinimum":1000,"versionPriority":15,
  "insecureSkipTLSVerify":true,"service":{"namespace":"default","name":"skewer-nowhere","port":443}}}`
	// fastFail bounds the answer for an APIService without a backend.
	fastFail = 5 * time.Second
)

// CheckScope judges proxy.scope.crd-apiservice: a CRD's resource is served
// by every apiserver itself, and an APIService without a backend answers
// 503 within fastFail on every apiserver; neither is forwarded (no other
// apiserver logs the requests).
func CheckScope(ctx context.Context, c *cluster.Cluster, w *Window) promise.Verdict {
	const id = "proxy.scope.crd-apiservice"
	admin, err := w.Old[0].client()
	if err != nil {
		return fail(id, "%v", err)
	}
	rc := admin.Discovery().RESTClient()
	objects := map[string]string{
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions": scopeCRD,
		"/apis/apiregistration.k8s.io/v1/apiservices":             scopeAPIService,
	}
	for path, body := range objects {
		err := rc.Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fail(id, "create %s: %v", path, err)
		}
	}
	all := w.all()
	defer removeScope(context.WithoutCancel(ctx), rc, all)
	var ev []string
	for _, s := range all {
		line, err := askScope(ctx, c, s, all)
		if err != nil {
			return fail(id, "%v", err)
		}
		if line.verdict != nil {
			return *line.verdict
		}
		ev = append(ev, line.said)
	}
	return promise.Verdict{ID: id, Outcome: promise.Pass, Evidence: append(ev, "each logged by the server asked alone")}
}

// removeScope deletes the scope check's CRD and APIService, and waits
// until no apiserver's discovery has their groups: each drops a deleted
// CRD in its own time, and the next check compares their views.
func removeScope(ctx context.Context, rc rest.Interface, all []Server) {
	_ = rc.Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.certify.skewer.io").Do(ctx).Error()
	_ = rc.Delete().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1.certify-agg.skewer.io").Do(ctx).Error()
	_ = waitDiscovery(ctx, all, discovery.Local, "the scope check's groups gone from every apiserver's discovery", func(local discovery.Set) []string {
		var left []string
		for _, r := range local {
			if strings.HasSuffix(r.Group, ".skewer.io") {
				left = append(left, "serves "+r.Key())
			}
		}
		return left
	})
}

// scopeSeen is how one apiserver answered the scope check: a line of
// evidence, or the verdict its answers failed.
type scopeSeen struct {
	said    string
	verdict *promise.Verdict
}

// askScope asks s, once it has established the CRD, for the CRD's
// widgets and for the APIService without a backend, and finds who logged
// the requests among all.
func askScope(ctx context.Context, c *cluster.Cluster, s Server, all []Server) (scopeSeen, error) {
	cs, err := s.client()
	if err != nil {
		return scopeSeen{}, err
	}
	err = wait.For(ctx, "certify/crd-established", "widgets served by "+s.Name, func(ctx context.Context) (bool, string, error) {
		if err := cs.Discovery().RESTClient().Get().AbsPath("/apis/certify.skewer.io/v1/namespaces/default/widgets").Do(ctx).Error(); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		return scopeSeen{}, err
	}
	tcs, ids, err := s.traced()
	if err != nil {
		return scopeSeen{}, err
	}
	src := tcs.Discovery().RESTClient()
	crdErr := src.Get().AbsPath("/apis/certify.skewer.io/v1/namespaces/default/widgets").Do(ctx).Error()
	start := time.Now()
	aggErr := src.Get().AbsPath("/apis/certify-agg.skewer.io/v1/things").Do(ctx).Error()
	took := time.Since(start)
	if v := scopeAnswers(s, crdErr, aggErr, took); v != nil {
		return scopeSeen{verdict: v}, nil
	}
	if err := notForwarded(ctx, c, s, all, ids.all()); err != nil {
		return scopeSeen{}, err
	}
	return scopeSeen{said: fmt.Sprintf("%s: widgets 200, APIService 503 in %s", s.Name, took.Round(time.Millisecond))}, nil
}

// scopeAnswers judges proxy.scope.crd-apiservice on how s answered for
// the CRD's widgets (crdErr) and for the APIService without a backend
// (aggErr, after took): nil when both held.
func scopeAnswers(s Server, crdErr, aggErr error, took time.Duration) *promise.Verdict {
	const id = "proxy.scope.crd-apiservice"
	var code int32
	if st, ok := aggErr.(apierrors.APIStatus); ok {
		code = st.Status().Code
	}
	var v promise.Verdict
	switch {
	case crdErr != nil:
		v = fail(id, "a CRD's widgets on %s (%s): %v", s.Name, s.Version, crdErr)
	case code != 503 || took > fastFail:
		v = fail(id, "an APIService without a backend on %s (%s): %v in %s, want 503 within %s", s.Name, s.Version, aggErr, took.Round(time.Millisecond), fastFail)
	default:
		return nil
	}
	return &v
}
