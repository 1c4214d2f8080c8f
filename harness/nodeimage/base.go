package nodeimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/skewer-k8s/skewer/internal/docker"
	"github.com/skewer-k8s/skewer/internal/run"
)

// Debian packages of the two root filesystems. The node's list follows kind's
// base image, less what only network storage tests need.
var (
	nodePackages = []string{
		"systemd", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux",
		"mount", "kmod", "libseccomp2", "pigz", "e2fsprogs", "bash", "ca-certificates",
		"curl", "jq", "procps",
	}
	// slimPackages back the images that need a shell or netfilter userland:
	// kube-proxy, the CNI stand-in and the load balancer stand-in.
	slimPackages = []string{"iptables", "nftables", "conntrack", "iproute2", "ca-certificates"}
)

const (
	nodeRootfsRepo = "skewer.local/rootfs-node"
	slimRootfsRepo = "skewer.local/rootfs-slim"
	baseRepo       = "skewer.local/kind-base"
)

func (p *plan) slimRef() string { return slimRootfsRepo + ":" + p.slimKey }
func (p *plan) baseRef() string { return baseRepo + ":" + p.baseKey }

// rootfs makes both Debian root filesystems with debootstrap and imports each
// as an image, unless images of the same suite and package set exist.
func (p *plan) rootfs(ctx context.Context) (bool, error) {
	cached := true
	for _, fs := range rootFilesystems() {
		ref := fs.ref()
		switch fs.repo {
		case nodeRootfsRepo:
			p.nodeRootfs = ref
		case slimRootfsRepo:
			p.slimKey = fs.key
		}
		if p.imageCurrent(ctx, ref, fs.key) {
			continue
		}
		cached = false
		if err := debootstrapImage(ctx, p.b.cacheDir("rootfs", fs.key), fs.pkgs, ref, fs.key); err != nil {
			return false, err
		}
	}
	return cached, nil
}

// rootFilesystem is one Debian root filesystem image: its packages and
// the key of its inputs.
type rootFilesystem struct {
	repo, key string
	pkgs      []string
}

func (fs rootFilesystem) ref() string { return fs.repo + ":" + fs.key }

// rootFilesystems are the node's root filesystem, then the slim one, in
// the order they are built.
func rootFilesystems() []rootFilesystem {
	var out []rootFilesystem
	for _, fs := range []rootFilesystem{{repo: nodeRootfsRepo, pkgs: nodePackages}, {repo: slimRootfsRepo, pkgs: slimPackages}} {
		fs.key = cacheKey("rootfs", debianSuite, debianMirror, strings.Join(fs.pkgs, ","))
		out = append(out, fs)
	}
	return out
}

// rootfsCached says whether both Debian root filesystems are here, made
// from the inputs this skewer would make them from: then no build runs
// debootstrap, the one step that needs root.
func rootfsCached(ctx context.Context) bool {
	for _, fs := range rootFilesystems() {
		if !imageCurrent(ctx, fs.ref(), fs.key) {
			return false
		}
	}
	return true
}

func debootstrapImage(ctx context.Context, dir string, pkgs []string, ref, key string) error {
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("debootstrap is not installed (apt-get install debootstrap, or make deps)")
	}
	args, err := debootstrapArgs(dir, pkgs, archiveKeyring)
	if err != nil {
		return err // before anything is removed or made
	}
	// What debootstrap makes belongs to root: removed as root too.
	clean := func() { _ = asRoot("rm", "-rf", dir).Run(context.WithoutCancel(ctx)) }
	clean()
	defer clean()
	if err := asRoot(args...).Run(ctx); err != nil {
		return rootHint(err)
	}
	for _, junk := range []string{"var/lib/apt/lists", "var/cache/apt", "var/log"} {
		_ = asRoot("rm", "-rf", filepath.Join(dir, junk)).Run(ctx)
	}
	tarball := dir + ".tar"
	defer os.Remove(tarball)
	// tar as root reads every file, whatever its mode; the archive it
	// writes is readable by all.
	if err := asRoot("tar", "--numeric-owner", "--sort=name", "-C", dir, "-cf", tarball, ".").Run(ctx); err != nil {
		return rootHint(err)
	}
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	return docker.Import(ctx, f, ref, labels(key)...)
}

// archiveKeyring is Debian's archive keyring (debian-archive-keyring).
// debootstrap fetches over plain http; given the keyring and
// --force-check-gpg it verifies the Release file's signature, and with it
// every package's checksum, or stops - without one it only warns and
// installs whatever it was sent.
var archiveKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// debootstrapArgs is the debootstrap command that makes a root filesystem
// of pkgs in dir, the archive verified with keyring; an error, before
// anything runs, when the keyring is not there.
func debootstrapArgs(dir string, pkgs []string, keyring string) ([]string, error) {
	if _, err := os.Stat(keyring); err != nil {
		return nil, fmt.Errorf("debootstrap verifies the Debian archive with its keyring %s, which is not here (apt-get install debian-archive-keyring, or make deps): %w", keyring, err)
	}
	return []string{"debootstrap", "--variant=minbase", "--keyring=" + keyring, "--force-check-gpg",
		"--include=" + strings.Join(pkgs, ","), debianSuite, dir, debianMirror}, nil
}

// asRoot is a command that needs root (debootstrap chroots and makes
// devices): run as is when skewer is root, else through sudo -n, which
// never prompts: on a hosted CI runner the user is not root and sudo asks
// for no password.
func asRoot(args ...string) *run.Cmd {
	if os.Geteuid() == 0 {
		return run.Command(args...)
	}
	return run.Command(append([]string{"sudo", "-n"}, args...)...)
}

// rootHint says what to do when sudo wanted a password.
func rootHint(err error) error {
	if os.Geteuid() != 0 && strings.Contains(err.Error(), "password is required") {
		return fmt.Errorf("building a Debian root filesystem needs root: run skewer as root, or give this user sudo without a password: %w", err)
	}
	return err
}

// kindModuleVersion is the version of sigs.k8s.io/kind this binary links,
// whose images/base/files the base image installs.
func kindModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "sigs.k8s.io/kind" {
				return m.Version
			}
		}
	}
	return "v0.33.0"
}

// baseImage builds kind's base image: the node root filesystem with kind's
// own base files and containerd, runc, crictl and CNI plugins built from the
// Go module proxy.
func (p *plan) baseImage(ctx context.Context) (bool, error) {
	kindVersion := kindModuleVersion()
	p.baseKey = cacheKey("base", p.nodeRootfs, kindVersion, containerdVersion, runcVersion,
		crictlVersion, cniPluginsVersion, baseDockerfile)
	if p.imageCurrent(ctx, p.baseRef(), p.baseKey) {
		return true, nil
	}
	kind, err := downloadModule(ctx, "sigs.k8s.io/kind", kindVersion)
	if err != nil {
		return false, err
	}
	binDir := p.b.cacheDir("bin", "base-"+cacheKey("base-binaries", containerdVersion, runcVersion, crictlVersion, cniPluginsVersion))
	if _, err := p.cachedDir(binDir, func(out string) error { return p.buildBaseBinaries(ctx, out) }); err != nil {
		return false, err
	}
	ctxDir, err := os.MkdirTemp(p.b.cacheDir(), "base-context-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(ctxDir)
	if err := run.Command("cp", "-r", filepath.Join(kind.Dir, "images/base/files"), filepath.Join(ctxDir, "files")).Run(ctx); err != nil {
		return false, err
	}
	if err := run.Command("cp", "-r", binDir, filepath.Join(ctxDir, "bin")).Run(ctx); err != nil {
		return false, err
	}
	dockerfile := fmt.Sprintf(baseDockerfile, p.nodeRootfs, LocalBuildLabel, keyLabel, p.baseKey)
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return false, err
	}
	return false, run.Command("docker", "build", "-q", "-t", p.baseRef(), ctxDir).Run(ctx)
}

// baseDockerfile follows kind's images/base/Dockerfile step by step, with
// binaries built here instead of downloaded.
const baseDockerfile = `FROM %s
COPY files/ /
COPY bin/containerd bin/ctr bin/containerd-shim-runc-v2 bin/crictl /usr/local/bin/
COPY bin/runc /usr/local/sbin/runc
COPY bin/cni/ /opt/cni/bin/
RUN chmod -R a+rX /kind /LICENSES /etc && chmod 0755 /usr/local/bin/* /kind/bin/* /usr/local/sbin/runc /opt/cni/bin/* \
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
 && ln -sf /usr/lib/systemd/systemd /sbin/init \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
 && systemctl mask systemd-binfmt.service \
 && mkdir -p /etc/kubernetes/manifests /var/log \
 && ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
    | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \
 && containerd --version && runc --version && crictl --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
LABEL %s=local %s=%s
`

// buildBaseBinaries builds the container runtime and its tools.
func (p *plan) buildBaseBinaries(ctx context.Context, out string) error {
	builds := []goBuild{{
		Name:     "containerd@" + containerdVersion,
		Require:  map[string]string{"github.com/containerd/containerd/v2": containerdVersion},
		Packages: []string{"github.com/containerd/containerd/v2/cmd/containerd", "github.com/containerd/containerd/v2/cmd/ctr", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"},
		Tags:     []string{"no_aufs", "no_zfs", "no_btrfs", "no_devmapper"},
		LDFlags:  []string{"-X github.com/containerd/containerd/v2/version.Version=" + containerdVersion},
		Out:      out,
	}, {
		// runc needs cgo for seccomp (libseccomp-dev on the build host).
		Name:     "runc@" + runcVersion,
		Require:  map[string]string{"github.com/opencontainers/runc": runcVersion},
		Packages: []string{"github.com/opencontainers/runc"},
		CGO:      true,
		Tags:     []string{"seccomp", "urfave_cli_no_docs"},
		LDFlags:  []string{"-X main.version=" + strings.TrimPrefix(runcVersion, "v")},
		Out:      out,
	}, {
		Name:     "cri-tools@" + crictlVersion,
		Require:  map[string]string{"sigs.k8s.io/cri-tools": crictlVersion},
		Packages: []string{"sigs.k8s.io/cri-tools/cmd/crictl"},
		LDFlags:  []string{"-X sigs.k8s.io/cri-tools/pkg/version.Version=" + strings.TrimPrefix(crictlVersion, "v")},
		Out:      out,
	}, {
		Name:    "cni-plugins@" + cniPluginsVersion,
		Require: map[string]string{"github.com/containernetworking/plugins": cniPluginsVersion},
		Packages: []string{
			"github.com/containernetworking/plugins/plugins/ipam/host-local",
			"github.com/containernetworking/plugins/plugins/main/loopback",
			"github.com/containernetworking/plugins/plugins/main/ptp",
			"github.com/containernetworking/plugins/plugins/meta/portmap",
		},
		Out: filepath.Join(out, "cni"),
	}}
	for _, gb := range builds {
		if err := p.goBuild(ctx, gb); err != nil {
			return err
		}
	}
	return nil
}
