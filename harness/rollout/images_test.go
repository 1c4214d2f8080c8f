package rollout

import (
	"slices"
	"testing"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
)

func TestAWorkerIsNotGivenTheStaticPodsImages(t *testing.T) {
	art := &nodeimage.Artifacts{Tars: map[string]string{
		"registry.k8s.io/kube-apiserver:v1.36.3-acme.1":          "apiserver.tar",
		"registry.k8s.io/kube-controller-manager:v1.36.3-acme.1": "cm.tar",
		"registry.k8s.io/kube-scheduler:v1.36.3-acme.1":          "scheduler.tar",
		"registry.k8s.io/etcd:3.6.8-0":                           "etcd.tar",
		"registry.k8s.io/kube-proxy:v1.36.3-acme.1":              "proxy.tar",
		"registry.k8s.io/coredns/coredns:v1.14.2":                "coredns.tar",
		"registry.k8s.io/pause:3.10.2":                           "pause.tar",
		"docker.io/kindest/kindnetd:skewer-4e3404067467":         "cni.tar",
		"localhost:5000/etcd-backup":                             "backup.tar",
	}}
	for _, tar := range art.Tars {
		art.ImageTars = append(art.ImageTars, tar)
	}
	slices.Sort(art.ImageTars)
	want := []string{"backup.tar", "cni.tar", "coredns.tar", "pause.tar", "proxy.tar"}
	if got := workerTars(art); !slices.Equal(got, want) {
		t.Errorf("a worker's tars: %v, want %v", got, want)
	}
}
