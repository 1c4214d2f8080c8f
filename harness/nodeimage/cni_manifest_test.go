package nodeimage

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The CNI manifest kind applies runs the NetworkPolicy engine beside the
// kindnetd stand-in, with the rights its informers need: a manifest that
// does not parse, or an engine without them, would leave every cluster
// without enforced policies (or without a network).
func TestCNIManifestRunsTheNetworkPolicyEngine(t *testing.T) {
	manifest := strings.NewReplacer("CNI_IMAGE", "docker.io/kindest/kindnetd:skewer-x", "{{ .PodSubnet }}", "10.244.0.0/16").Replace(cniManifest)
	var ds appsv1.DaemonSet
	var role rbacv1.ClusterRole
	for _, doc := range strings.Split(manifest, "\n---\n")[1:] {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatalf("a document of the manifest does not parse: %v\n%s", err, doc)
		}
		var err error
		switch kind.Kind {
		case "DaemonSet":
			err = yaml.UnmarshalStrict([]byte(doc), &ds)
		case "ClusterRole":
			err = yaml.UnmarshalStrict([]byte(doc), &role)
		}
		if err != nil {
			t.Fatalf("%s: %v", kind.Kind, err)
		}
	}
	var engine bool
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "kube-network-policies" {
			engine = c.Command[0] == "/usr/local/bin/"+netpol.name && c.SecurityContext != nil && *c.SecurityContext.Privileged
		}
	}
	if !engine {
		t.Errorf("the DaemonSet runs no privileged %s: %+v", netpol.name, ds.Spec.Template.Spec.Containers)
	}
	granted := map[string]bool{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			granted[res] = slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch")
		}
	}
	for _, res := range []string{"pods", "namespaces", "networkpolicies"} {
		if !granted[res] {
			t.Errorf("the engine may not list and watch %s", res)
		}
	}
}
