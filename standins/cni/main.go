// Command kindnetd is skewer's stand-in for kind's default CNI daemon: it
// writes this node's CNI configuration from its pod CIDR, keeps a route to
// every other node's pod CIDR in step as nodes come, go and restart, and
// masquerades pod traffic that leaves the cluster.
package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const confPath = "/etc/cni/net.d/10-kindnet.conflist"

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "kindnetd (skewer stand-in):", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	self, hostIP, podSubnet := os.Getenv("NODE_NAME"), os.Getenv("HOST_IP"), os.Getenv("POD_SUBNET")
	if self == "" || podSubnet == "" {
		return fmt.Errorf("NODE_NAME and POD_SUBNET must be set")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	// The control-plane endpoint (kind patches it in) works before kube-proxy
	// has programmed the Service IP.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := ensureMasquerade(podSubnet); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 30*time.Second)
	nodes := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, n any) { poke(n) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	mtu := mtuOf(hostIP)
	log.Printf("node %s, host IP %s, pod subnet %s, MTU %d", self, hostIP, podSubnet, mtu)
	tick := time.NewTicker(10 * time.Second) // also repairs routes lost to a restart
	defer tick.Stop()
	for {
		list, err := nodes.Lister().List(labels.Everything())
		if err == nil {
			err = reconcile(list, self, mtu)
		}
		if err != nil {
			log.Print(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

func reconcile(nodes []*corev1.Node, self string, mtu int) error {
	for _, n := range nodes {
		if n.Name != self {
			continue
		}
		conf, err := conflist(podCIDRs(n), mtu)
		if err != nil {
			return fmt.Errorf("CNI configuration not written: %w", err)
		}
		if err := writeIfChanged(confPath, conf); err != nil {
			return err
		}
	}
	return syncRoutes(nodeRoutes(nodes, self))
}

func writeIfChanged(path string, body []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, body) {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return err
	}
	log.Printf("writing %s", path)
	return os.Rename(tmp, path)
}
