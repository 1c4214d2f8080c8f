package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// list builds a discovery document as an apiserver writes it, from
// "group/version/resource:verb,verb" entries.
func list(t *testing.T, entries ...string) []byte {
	t.Helper()
	groups := map[string]*apidiscoveryv2.APIGroupDiscovery{}
	var order []string
	for _, e := range entries {
		gvr, verbs, _ := strings.Cut(e, ":")
		parts := strings.Split(gvr, "/")
		g, ok := groups[parts[0]]
		if !ok {
			g = &apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: parts[0]}}
			groups[parts[0]] = g
			order = append(order, parts[0])
		}
		g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: parts[1], Resources: []apidiscoveryv2.APIResourceDiscovery{{
			Resource: parts[2], Scope: apidiscoveryv2.ScopeCluster, Verbs: strings.Split(verbs, ","),
			ResponseKind: &metav1.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: "Kind" + parts[2]},
			Subresources: []apidiscoveryv2.APISubresourceDiscovery{{Subresource: "status"}},
		}}})
	}
	doc := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	for _, name := range order {
		doc.Items = append(doc.Items, *groups[name])
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

const full = ":create,delete,deletecollection,get,list,patch,update,watch"

func TestOnlyInFindsWhatTheNewerServerAdds(t *testing.T) {
	older, err := Parse(list(t, "apps/v1/deployments"+full, "admissionregistration.k8s.io/v1/validatingadmissionpolicies"+full))
	if err != nil {
		t.Fatal(err)
	}
	newer, err := Parse(list(t, "apps/v1/deployments"+full, "admissionregistration.k8s.io/v1/validatingadmissionpolicies"+full,
		"admissionregistration.k8s.io/v1/mutatingadmissionpolicies"+full, "a.example/v1/readonly:get,list"))
	if err != nil {
		t.Fatal(err)
	}
	got := OnlyIn(newer, older)
	if len(got) != 2 || got[0].Key() != "admissionregistration.k8s.io/v1/mutatingadmissionpolicies" || got[1].Routable() {
		t.Fatalf("OnlyIn = %v: want the routable mutatingadmissionpolicies first, the read-only one after", got)
	}
	if got[0].Kind != "Kindmutatingadmissionpolicies" {
		t.Errorf("kind %q, want discovery's responseKind", got[0].Kind)
	}
	if got[0].Path() != "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies" {
		t.Errorf("path %s", got[0].Path())
	}
	if len(OnlyIn(older, older)) != 0 {
		t.Error("a server adds nothing to itself")
	}
}

func TestParseRefusesWhatIsNotAggregatedDiscovery(t *testing.T) {
	for _, raw := range []string{`{"kind":"APIGroupList","groups":[]}`, `not json`} {
		if _, err := Parse([]byte(raw)); err == nil {
			t.Errorf("Parse(%s) accepted", raw)
		}
	}
}
