package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/skewer-k8s/skewer/harness/cluster"
	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
)

// BenchmarkHACluster creates the ha profile to Ready with skewer and with
// the kind CLI, same configuration and images, one after the other in the
// same run, and prints both times, their ratio and each cluster's peak
// memory (the sum over its containers as docker stats counts them,
// docker.Resident, sampled every 2 s).
func BenchmarkHACluster(b *testing.B) {
	needDocker(b)
	ctx := context.Background()
	spec, err := cluster.LoadProfile("../clusters/ha.yaml")
	if err != nil {
		b.Fatal(err)
	}
	spec.Version = versions[0]
	if v := os.Getenv("BENCH_VERSION"); v != "" {
		if spec.Version, err = version.Parse(v); err != nil {
			b.Fatalf("BENCH_VERSION: %v", err)
		}
	}
	resolver := &nodeimage.Resolver{Source: nodeimage.SourceBuild, Out: discard{}}
	image, err := resolver.Resolve(ctx, spec.Version)
	if err != nil {
		b.Fatal(err)
	}
	kind := kindCLI(b)

	var skewerTime, kindTime, skewerDelete, kindDelete time.Duration
	b.Run("skewer", func(b *testing.B) {
		spec.Name = "bench-skewer"
		state := b.TempDir()
		peak := sampleMemory(spec.Name)
		start := time.Now()
		c, err := cluster.Create(ctx, spec, resolver.Resolve, cluster.Options{StateDir: state, Out: discard{}})
		skewerTime = time.Since(start)
		mem := peak()
		if err != nil {
			if c != nil {
				c.Delete(ctx, false)
			}
			b.Fatal(err)
		}
		report(b, skewerTime.Seconds(), "s")
		report(b, mem/1e6, "MB-peak")
		start = time.Now()
		if err := c.Delete(ctx, false); err != nil {
			b.Fatal(err)
		}
		skewerDelete = time.Since(start)
	})
	b.Run("kind-cli", func(b *testing.B) {
		spec.Name = "bench-kind"
		state := b.TempDir()
		host, err := cluster.ProbeHost(ctx, image)
		if err != nil {
			b.Fatal(err)
		}
		cfg, err := cluster.Prepare(spec, host, state, nil)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := yaml.Marshal(cfg)
		cfgPath := filepath.Join(state, "kind.yaml")
		os.WriteFile(cfgPath, raw, 0o644)
		kubeconfig := filepath.Join(state, "kubeconfig")
		peak := sampleMemory(spec.Name)
		start := time.Now()
		out, err := exec.Command(kind, "create", "cluster", "--name", spec.Name, "--config", cfgPath,
			"--kubeconfig", kubeconfig, "--wait", "4m").CombinedOutput()
		kindTime = time.Since(start)
		mem := peak()
		start = time.Now()
		derr := exec.Command(kind, "delete", "cluster", "--name", spec.Name, "--kubeconfig", kubeconfig).Run()
		kindDelete = time.Since(start)
		if err != nil {
			b.Fatalf("kind create cluster: %v: %s", err, out)
		}
		if derr != nil {
			b.Fatalf("kind delete cluster: %v", derr)
		}
		report(b, kindTime.Seconds(), "s")
		report(b, mem/1e6, "MB-peak")
	})
	if skewerTime > 0 && kindTime > 0 {
		b.Run("ratio", func(b *testing.B) {
			report(b, skewerTime.Seconds()/kindTime.Seconds(), "skewer/kind")
		})
		setAnchor(anchorCreate, kindTime)
		record(figure{what: "create the ha profile (3 control planes, 1 worker)", took: skewerTime, anchor: anchorCreate, maxRatio: maxAnchorRatio})
	}
	if skewerDelete > 0 && kindDelete > 0 {
		setAnchor(anchorDelete, kindDelete)
		record(figure{what: "delete it", took: skewerDelete, anchor: anchorDelete, maxRatio: maxAnchorRatio})
	}
}

// sampleMemory samples the memory of a cluster's containers every 2 s
// until the returned function is called, which returns the peak sum in
// bytes.
func sampleMemory(clusterName string) func() float64 {
	stop := docker.WatchResident(context.Background(), "label=io.x-k8s.kind.cluster="+clusterName, 2*time.Second, nil)
	return func() float64 { return float64(stop().Bytes) }
}
