package faults

import (
	"strings"
	"testing"
)

const kubeadmManifest = `apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-apiserver
    - --advertise-address=172.18.0.4
    - --feature-gates=UnknownVersionInteroperabilityProxy=true
    - --peer-ca-file=/etc/kubernetes/pki/ca.crt
    - --secure-port=6443
    image: registry.k8s.io/kube-apiserver:v1.35.4
    name: kube-apiserver
  hostNetwork: true
`

func TestEditFlags(t *testing.T) {
	out, err := editFlags(kubeadmManifest,
		map[string]string{"feature-gates": "UnknownVersionInteroperabilityProxy=false", "runtime-config": "node.k8s.io/v1=false"},
		nil, []string{"peer-ca-file"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- kube-apiserver\n",
		"- --advertise-address=172.18.0.4",
		"- --feature-gates=UnknownVersionInteroperabilityProxy=false",
		"- --runtime-config=node.k8s.io/v1=false",
		"- --secure-port=6443",
		"image: registry.k8s.io/kube-apiserver:v1.35.4",
		"hostNetwork: true",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("edited manifest lacks %q:\n%s", want, out)
		}
	}
	for _, gone := range []string{"peer-ca-file", "=true\n"} {
		if strings.Contains(out, gone) {
			t.Errorf("edited manifest still has %q:\n%s", gone, out)
		}
	}
	// The flag replaced in place keeps its position.
	if strings.Index(out, "--feature-gates") > strings.Index(out, "--secure-port") {
		t.Errorf("--feature-gates moved:\n%s", out)
	}
}

func TestEditFlagsRefusesBadInput(t *testing.T) {
	if _, err := editFlags("kind: Pod\nspec:\n  containers:\n  - name: etcd\n", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "no kube-apiserver container") {
		t.Errorf("want an error for a manifest without kube-apiserver, got %v", err)
	}
	if _, err := editFlags(kubeadmManifest, map[string]string{"peer-ca-file": "x"}, nil, []string{"peer-ca-file"}); err == nil {
		t.Error("want an error for a flag both set and removed")
	}
	if _, err := editFlags(kubeadmManifest, map[string]string{"feature-gates": "x"}, map[string]string{"feature-gates": "G=false"}, nil); err == nil {
		t.Error("want an error for a flag both set and given an item")
	}
	if _, err := editFlags("{not yaml", nil, nil, nil); err == nil {
		t.Error("want an error for text that is not a manifest")
	}
}

// An item replaces its key in a list flag and keeps the other items; a
// list flag the manifest lacks is added with the item alone.
func TestEditFlagsSetsOneItemOfAList(t *testing.T) {
	out, err := editFlags(kubeadmManifest, nil,
		map[string]string{"feature-gates": "UnknownVersionInteroperabilityProxy=false", "runtime-config": "node.k8s.io/v1=false"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- --feature-gates=UnknownVersionInteroperabilityProxy=false\n", "- --runtime-config=node.k8s.io/v1=false\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("edited manifest lacks %q:\n%s", want, out)
		}
	}
	command := []string{"kube-apiserver", "--feature-gates=A=true,UnknownVersionInteroperabilityProxy=true,B=false", "--runtime-config="}
	if got := withListItem(command, "feature-gates", "UnknownVersionInteroperabilityProxy=false"); got != "A=true,B=false,UnknownVersionInteroperabilityProxy=false" {
		t.Errorf("feature-gates: %q", got)
	}
	if got := withListItem(command, "runtime-config", "node.k8s.io/v1=false"); got != "node.k8s.io/v1=false" {
		t.Errorf("an empty runtime-config: %q", got)
	}
}
