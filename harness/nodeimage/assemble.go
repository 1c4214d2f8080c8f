package nodeimage

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// nodeImage assembles the node image the way kind's node-image builder does,
// from local image tars only: binaries in /usr/bin, /kind/version, the CNI
// manifest, and every image imported into the node's containerd, pinned.
func (p *plan) nodeImage(ctx context.Context) (bool, error) {
	manifest := strings.ReplaceAll(cniManifest, "CNI_IMAGE", p.cniRef)
	key := cacheKey("node", p.baseKey, p.kubeKey, p.imagesKey, manifest)
	ref := p.ref()
	if p.imageCurrent(ctx, ref, key) {
		return true, nil
	}
	name := fmt.Sprintf("skewer-build-%d-%d", time.Now().Unix(), rand.Intn(1<<16))
	if err := run.Command("docker", "run", "-d", "--name", name, "--entrypoint=sleep",
		"--security-opt", "seccomp=unconfined", "--label", LocalBuildLabel+"=builder",
		p.baseRef(), "infinity").Run(ctx); err != nil {
		return false, err
	}
	// Clean up with a context of its own: ctx may be what was cancelled.
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = docker.Remove(cctx, name)
	}()
	for _, bin := range []string{"kubeadm", "kubelet", "kubectl"} {
		if err := docker.Copy(ctx, filepath.Join(p.kubeDir, bin), name, "/usr/bin/"+bin); err != nil {
			return false, err
		}
	}
	for path, body := range map[string]string{
		"/kind/version":                    p.gitVersion(),
		"/kind/manifests/default-cni.yaml": manifest,
	} {
		if _, err := docker.Exec(ctx, name, "mkdir", "-p", filepath.Dir(path)); err != nil {
			return false, err
		}
		if _, err := docker.ExecInput(ctx, name, strings.NewReader(body), "cp", "/dev/stdin", path); err != nil {
			return false, err
		}
	}
	if err := p.preloadImages(ctx, name); err != nil {
		return false, err
	}
	return false, run.Command("docker", "commit",
		"--change", `ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]`,
		"--change", `CMD []`,
		"--change", fmt.Sprintf("LABEL %s=local %s=%s io.skewer.kubernetes-version=%s", LocalBuildLabel, keyLabel, key, p.gitVersion()),
		name, ref).Run(ctx)
}

// preloadImages starts containerd in the build container and imports every
// image tar, pinned so kubelet's image GC never removes it.
func (p *plan) preloadImages(ctx context.Context, container string) error {
	if _, err := docker.Exec(ctx, container, "bash", "-c", "nohup containerd >/var/log/containerd-build.log 2>&1 &"); err != nil {
		return err
	}
	if _, err := docker.Exec(ctx, container, "bash", "-c",
		"for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; cat /var/log/containerd-build.log; exit 1"); err != nil {
		return fmt.Errorf("containerd did not start in the build container: %w", err)
	}
	for _, tarPath := range p.imageTars {
		f, err := os.Open(tarPath)
		if err != nil {
			return err
		}
		_, err = docker.ExecInput(ctx, container, f, "ctr", "--namespace=k8s.io", "images", "import",
			"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", "-")
		f.Close()
		if err != nil {
			return fmt.Errorf("failed to import %s: %w", filepath.Base(tarPath), err)
		}
	}
	// kind's containerd config names its own sandbox image; point that name
	// at the pause image kubeadm asked for.
	images, err := docker.Exec(ctx, container, "ctr", "--namespace=k8s.io", "images", "list", "-q")
	if err != nil {
		return err
	}
	for _, img := range strings.Fields(images) {
		if strings.HasPrefix(img, "registry.k8s.io/pause:") && img != kindSandboxImage {
			if _, err := docker.Exec(ctx, container, "ctr", "--namespace=k8s.io", "images", "tag", "--force", img, kindSandboxImage); err != nil {
				return err
			}
			if _, err := docker.Exec(ctx, container, "ctr", "--namespace=k8s.io", "images", "label", kindSandboxImage, "io.cri-containerd.pinned=pinned"); err != nil {
				return err
			}
			break
		}
	}
	// The two scripts here need a shell: containerd started in the
	// background, and waits that run inside the build container.
	// sleep is PID 1 here and reaps nothing: a stopped containerd stays a
	// zombie, so wait for that state rather than for the process to vanish.
	_, err = docker.Exec(ctx, container, "bash", "-c", `pid=$(pgrep -xo containerd) || exit 0
kill "$pid"
for i in $(seq 1 50); do
  state=$(awk '/^State:/ {print $2}' /proc/$pid/status 2>/dev/null)
  [ -z "$state" ] || [ "$state" = Z ] && exit 0
  sleep 0.2
done
echo "containerd did not stop" >&2; exit 1`)
	return err
}
