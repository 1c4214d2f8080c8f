package nodeimage

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// staticLayout versions the layout of static images: part of their keys,
// so a change to it rebuilds them and nothing else.
const staticLayout = "static-layout-2"

// staticImage is an image of static binaries and nothing else but /tmp and
// the passwd/group files; its layer is byte-for-byte reproducible.
type staticImage struct {
	ref        string
	files      map[string]string // path in image -> host path
	entrypoint string
}

func (s staticImage) tar(w io.Writer) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirs["/tmp"] = true
	dirs["/etc"] = true
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	sort.Strings(paths)
	for _, d := range dirList {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode}); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, body string }{ // a slice: map order would change the layer
		{"etc/group", "root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n"},
		{"etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
	} {
		if err := writeTarFile(tw, f.name, 0o644, strings.NewReader(f.body), int64(len(f.body))); err != nil {
			return err
		}
	}
	for _, p := range paths {
		f, err := os.Open(s.files[p])
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err == nil {
			err = writeTarFile(tw, strings.TrimPrefix(p, "/"), 0o755, f, st.Size())
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeTarFile(tw *tar.Writer, name string, mode int64, r io.Reader, size int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}

func (s staticImage) build(ctx context.Context, key string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(s.tar(pw)) }()
	changes := append(labels(key), "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	if s.entrypoint != "" {
		changes = append(changes, fmt.Sprintf(`ENTRYPOINT ["%s"]`, s.entrypoint))
	}
	err := docker.Import(ctx, pr, s.ref, changes...)
	pr.CloseWithError(err)
	return err
}

// kubeadmImages asks the built kubeadm which images it will run.
func (p *plan) kubeadmImages(ctx context.Context) (map[string]string, error) {
	out, err := run.Command(filepath.Join(p.kubeDir, "kubeadm"), "config", "images", "list",
		"--kubernetes-version", p.gitVersion()).String(ctx)
	if err != nil {
		return nil, err
	}
	images := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		ref := strings.TrimSpace(sc.Text())
		if i := strings.LastIndex(ref, ":"); i > 0 {
			images[filepath.Base(ref[:i])] = ref
		}
	}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd", "coredns", "pause"} {
		if images[name] == "" {
			return nil, fmt.Errorf("kubeadm %s lists no %s image in %q", p.gitVersion(), name, out)
		}
	}
	return images, nil
}

func imageTag(ref string) string { return ref[strings.LastIndex(ref, ":")+1:] }

// componentImages makes every image kubeadm will ask for, under the exact
// names it asks for, and saves each as a tar to preload into the node.
func (p *plan) componentImages(ctx context.Context) (bool, error) {
	images, err := p.kubeadmImages(ctx)
	if err != nil {
		return false, err
	}
	etcdVersion := "v" + strings.SplitN(imageTag(images["etcd"]), "-", 2)[0]
	corednsVersion := imageTag(images["coredns"])
	pauseVersion := imageTag(images["pause"])

	var builds []componentBuild
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		builds = append(builds, componentBuild{ref: images[c], key: cacheKey(staticLayout, c, p.kubeKey), make: p.staticComponent(c)})
	}
	builds = append(builds,
		componentBuild{ref: images["kube-proxy"], key: cacheKey("kube-proxy", p.kubeKey, p.slimKey), make: p.kubeProxyImage},
		componentBuild{ref: images["etcd"], key: cacheKey(staticLayout, "etcd", etcdVersion), make: p.etcdImage(etcdVersion)},
		componentBuild{ref: images["coredns"], key: cacheKey(staticLayout, "coredns", corednsVersion), make: p.corednsImage(corednsVersion)},
		componentBuild{ref: images["pause"], key: cacheKey(staticLayout, "pause", pauseVersion, cacheKey("kubernetes", p.moduleVersion())), make: p.pauseImage(pauseVersion)},
	)
	return p.saveImages(ctx, builds)
}

// componentBuild is one image a node preloads: known in the node as ref
// (the name kubeadm asks for), on the host as HostName(ref).
type componentBuild struct {
	ref  string
	key  string
	make func(ctx context.Context, host, key string) error // builds the image as host
}

// saveImages builds what is missing and keeps one docker-archive tar per
// image, named by its key, for the node image to import.
func (p *plan) saveImages(ctx context.Context, builds []componentBuild) (bool, error) {
	cached := true
	var keys []string
	for _, c := range builds {
		keys = append(keys, c.key)
		tarPath := p.b.cacheDir("images", strings.NewReplacer("/", "_", ":", "_").Replace(c.ref)+"-"+c.key+".tar")
		p.imageTars = append(p.imageTars, tarPath)
		if p.tarOf == nil {
			p.tarOf = map[string]string{}
		}
		p.tarOf[c.ref] = tarPath
		host := HostName(c.ref)
		current := p.imageCurrent(ctx, host, c.key)
		if _, err := os.Stat(tarPath); err == nil && current {
			continue
		}
		cached = false
		if !current {
			if err := c.make(ctx, host, c.key); err != nil {
				return false, fmt.Errorf("%s: %w", c.ref, err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(tarPath), 0o755); err != nil {
			return false, err
		}
		if err := docker.SaveAs(ctx, host, c.ref, tarPath); err != nil {
			return false, err
		}
	}
	p.imagesKey = cacheKey(append([]string{p.imagesKey}, keys...)...)
	return cached, nil
}

func (p *plan) staticComponent(command string) func(context.Context, string, string) error {
	return func(ctx context.Context, ref, key string) error {
		return staticImage{ref: ref, files: map[string]string{"/usr/local/bin/" + command: filepath.Join(p.kubeDir, command)}}.build(ctx, key)
	}
}

func (p *plan) etcdImage(version string) func(context.Context, string, string) error {
	return func(ctx context.Context, ref, key string) error {
		dir := p.b.cacheDir("bin", "etcd-"+version+"-"+key)
		_, err := p.cachedDir(dir, func(out string) error {
			// etcd's server module is the etcd command; its binary takes the
			// name of the module's last element, "server".
			return p.goBuild(ctx, goBuild{
				Name: "etcd@" + version,
				Require: map[string]string{
					"go.etcd.io/etcd/server/v3":  version,
					"go.etcd.io/etcd/etcdctl/v3": version,
				},
				Packages: []string{"go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/etcdctl/v3"},
				Out:      out,
			})
		})
		if err != nil {
			return err
		}
		return staticImage{ref: ref, files: map[string]string{
			"/usr/local/bin/etcd":    filepath.Join(dir, "server"),
			"/usr/local/bin/etcdctl": filepath.Join(dir, "etcdctl"),
		}}.build(ctx, key)
	}
}

func (p *plan) corednsImage(version string) func(context.Context, string, string) error {
	return func(ctx context.Context, ref, key string) error {
		dir := p.b.cacheDir("bin", "coredns-"+version+"-"+key)
		_, err := p.cachedDir(dir, func(out string) error {
			return p.goBuild(ctx, goBuild{
				Name:     "coredns@" + version,
				Require:  map[string]string{"github.com/coredns/coredns": version},
				Packages: []string{"github.com/coredns/coredns"},
				Out:      out,
			})
		})
		if err != nil {
			return err
		}
		return staticImage{ref: ref, entrypoint: "/coredns",
			files: map[string]string{"/coredns": filepath.Join(dir, "coredns")}}.build(ctx, key)
	}
}

// pauseImage compiles pause.c from the Kubernetes module, statically.
func (p *plan) pauseImage(version string) func(context.Context, string, string) error {
	return func(ctx context.Context, ref, key string) error {
		info, err := downloadModule(ctx, "k8s.io/kubernetes", p.moduleVersion())
		if err != nil {
			return fmt.Errorf("pause is built from build/pause of k8s.io/kubernetes@%s: %w", p.moduleVersion(), err)
		}
		dir := p.b.cacheDir("bin", "pause-"+version+"-"+key)
		_, err = p.cachedDir(dir, func(out string) error {
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			return run.Command("gcc", "-Os", "-static", "-Wall", "-Werror", "-DVERSION="+version,
				"-o", filepath.Join(out, "pause"), filepath.Join(info.Dir, "build/pause/linux/pause.c")).Run(ctx)
		})
		if err != nil {
			return err
		}
		return staticImage{ref: ref, entrypoint: "/pause",
			files: map[string]string{"/pause": filepath.Join(dir, "pause")}}.build(ctx, key)
	}
}

// kubeProxyImage needs netfilter userland, so it stands on the slim Debian
// image, with a wrapper that picks the iptables backend the node uses.
func (p *plan) kubeProxyImage(ctx context.Context, ref, key string) error {
	return dockerBuild(ctx, ref, map[string][]byte{
		"Dockerfile":       []byte(fmt.Sprintf("FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n%s", p.slimRef(), iptablesWrapperDockerfile)),
		"iptables-wrapper": []byte(iptablesWrapper),
	}, map[string]string{"kube-proxy": filepath.Join(p.kubeDir, "kube-proxy")}, key)
}

// dockerBuild runs a classic docker build over a context of in-memory files
// and copies of host files.
func dockerBuild(ctx context.Context, ref string, files map[string][]byte, hostFiles map[string]string, key string) error {
	dir, err := os.MkdirTemp("", "skewer-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o755); err != nil {
			return err
		}
	}
	for name, src := range hostFiles {
		if err := run.Command("cp", src, filepath.Join(dir, name)).Run(ctx); err != nil {
			return err
		}
	}
	df := filepath.Join(dir, "Dockerfile")
	body, _ := os.ReadFile(df)
	body = append(body, []byte(fmt.Sprintf("\nLABEL %s=local %s=%s\n", LocalBuildLabel, keyLabel, key))...)
	if err := os.WriteFile(df, body, 0o644); err != nil {
		return err
	}
	return run.Command("docker", "build", "-q", "-t", ref, dir).Run(ctx)
}

// iptablesWrapper chooses, on first use, the iptables backend (legacy or nft)
// that already holds the node's rules, the way kube-proxy's upstream image
// does, so that every writer on a node uses one backend.
const iptablesWrapper = `#!/bin/sh
set -e
count() { ( "$1" -t nat -S 2>/dev/null; "$1" -t filter -S 2>/dev/null ) | grep -c '^-' || true; }
legacy=$(count iptables-legacy)
nft=$(count iptables-nft)
mode=nft
if [ "$legacy" -gt "$nft" ]; then mode=legacy; fi
for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  update-alternatives --set "$cmd" "/usr/sbin/$cmd-$mode" >/dev/null 2>&1 || ln -sf "/usr/sbin/xtables-$mode-multi" "/usr/sbin/$cmd"
done
exec "$0" "$@"
`

const iptablesWrapperDockerfile = `COPY iptables-wrapper /usr/sbin/iptables-wrapper
RUN for cmd in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do \
      ln -sf /usr/sbin/iptables-wrapper /usr/sbin/$cmd; done
`
