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
		[]string{"peer-ca-file"})
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
	if _, err := editFlags("kind: Pod\nspec:\n  containers:\n  - name: etcd\n", nil, nil); err == nil || !strings.Contains(err.Error(), "no kube-apiserver container") {
		t.Errorf("want an error for a manifest without kube-apiserver, got %v", err)
	}
	if _, err := editFlags(kubeadmManifest, map[string]string{"peer-ca-file": "x"}, []string{"peer-ca-file"}); err == nil {
		t.Error("want an error for a flag both set and removed")
	}
	if _, err := editFlags("{not yaml", nil, nil); err == nil {
		t.Error("want an error for text that is not a manifest")
	}
}
