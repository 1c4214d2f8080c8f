package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kind "sigs.k8s.io/kind/pkg/cluster"
	kindexec "sigs.k8s.io/kind/pkg/exec"

	"github.com/skewer-k8s/skewer/harness/nodeimage"
	"github.com/skewer-k8s/skewer/harness/version"
	"github.com/skewer-k8s/skewer/internal/docker"
	"sigs.k8s.io/yaml"
)

// ImageResolver makes sure a node image of a version exists and names it.
type ImageResolver func(ctx context.Context, v version.Version) (string, error)

// Create validates the spec, makes sure every node image exists (through
// resolve), adapts to the host and creates the cluster through kind's Go
// library. Nothing is created when the input is bad. If ctx is cancelled
// mid-way, whatever was created is deleted before Create returns.
func Create(ctx context.Context, s *Spec, resolve ImageResolver, o Options) (*Cluster, error) {
	o.defaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := docker.Ping(ctx); err != nil {
		return nil, err
	}
	p := newProgress(o.Out, o.Verbosity)
	c := &Cluster{Name: s.Name, Dir: filepath.Join(o.StateDir, s.Name), Spec: s, provider: newProvider(p), log: p}
	existing, err := c.provider.List()
	if err != nil {
		return nil, fmt.Errorf("failed to list kind clusters: %w", err)
	}
	for _, n := range existing {
		if n == s.Name {
			return nil, fmt.Errorf("a cluster named %q already exists (delete it with: skewer down --name %s)", s.Name, s.Name)
		}
	}
	// No cluster of that name: a state folder of it is an earlier one's.
	if removed, err := RemoveState(s.Name, o); err != nil {
		return nil, err
	} else if removed {
		p.Infof("removed the state folder %s an earlier cluster %q left", c.Dir, s.Name)
	}
	var image string
	c.images = NodeImages{}
	for _, v := range s.Versions() {
		p.Infof("node image for %s", v)
		if image, err = resolve(ctx, v); err != nil {
			return nil, err
		}
		if image != nodeimage.Ref(v) {
			c.images[v] = image
		}
	}
	host, err := ProbeHost(ctx, image)
	if err != nil {
		return nil, err
	}
	p.Infof("host: cgroup v1=%t, restrict_oom_score_adj=%t", host.CgroupV1, host.RestrictOOMScoreAdj)
	cfg, err := Prepare(s, host, c.Dir, c.images)
	if err != nil {
		return nil, err
	}
	p.Infof("creating cluster %q (%d control planes, %d workers, versions %v); kubeconfig %s",
		s.Name, s.ControlPlanes, s.Workers, s.Versions(), c.Kubeconfig())
	if err := c.kindCreate(ctx, cfg, o); err != nil {
		return nil, err
	}
	p.Infof("cluster %q ready", s.Name)
	return c, nil
}

// kindCreate has kind create c from cfg. Interrupted, it deletes what
// kind made; failed, it says what kind's command said and deletes what
// it made unless o retains it.
func (c *Cluster) kindCreate(ctx context.Context, cfg *v1alpha4.Cluster, o Options) error {
	name := c.Name
	done := make(chan error, 1)
	go func() {
		done <- c.provider.Create(name,
			kind.CreateWithV1Alpha4Config(cfg),
			kind.CreateWithKubeconfigPath(c.Kubeconfig()),
			kind.CreateWithRetain(o.Retain),
			kind.CreateWithWaitForReady(o.WaitForReady),
			kind.CreateWithDisplayUsage(false),
			kind.CreateWithDisplaySalutation(false))
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// kind takes no context: deleting the containers under it makes it
		// fail fast; then clean up whatever it made in between.
		c.log.Infof("interrupted: deleting cluster %q", name)
		first := c.provider.Delete(name, c.Kubeconfig())
		<-done
		// The second delete catches what kind made after the first.
		if err := c.Delete(context.WithoutCancel(ctx), false); err != nil {
			return errors.Join(ctx.Err(), fmt.Errorf("failed to clean up the interrupted create (delete it with: skewer down --name %s): %w", name, errors.Join(first, err)))
		}
		return ctx.Err()
	}
	if err == nil {
		return nil
	}
	// kind's error names the command; what the command said is apart.
	if re := kindexec.RunErrorForError(err); re != nil && len(re.Output) > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(re.Output)))
	}
	err = fmt.Errorf("failed to create cluster %q: %w", name, err)
	if !o.Retain {
		if derr := c.Delete(context.WithoutCancel(ctx), true); derr != nil {
			err = errors.Join(err, fmt.Errorf("failed to clean up after it: %w", derr))
		}
	}
	return err
}

// Prepare writes the files the nodes of s mount under dir and returns the
// kind configuration that mounts them, its nodes started from images (by
// version; skewer's own builds where it names none). Create uses it; so
// does a benchmark that hands the same configuration to the kind CLI.
func Prepare(s *Spec, h Host, dir string, images NodeImages) (*v1alpha4.Cluster, error) {
	l := layout{dir}
	cfg, err := kindConfig(s, h, l, images)
	if err != nil {
		return nil, err
	}
	if err := writeState(s, l); err != nil {
		return nil, err
	}
	return cfg, images.save(l)
}

// writeState writes the files the nodes mount: the audit policy, the
// registry configuration that makes a pull fail at once (noPullHosts), a log
// directory per control plane and kubeadm patches where a node needs them.
func writeState(s *Spec, l layout) error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	raw, err := yaml.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.spec(), raw, 0o644); err != nil {
		return err
	}
	policy := []byte(defaultAuditPolicy)
	if s.AuditPolicy != "" {
		var err error
		if policy, err = os.ReadFile(s.AuditPolicy); err != nil {
			return fmt.Errorf("failed to read audit policy: %w", err)
		}
	}
	if err := os.WriteFile(l.auditPolicy(), policy, 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(l.registryHosts(), "_default"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.registryHosts(), "_default", "hosts.toml"), []byte(noPullHosts), 0o644); err != nil {
		return err
	}
	bootstrap := s.ControlPlaneVersion(0)
	for i := 0; i < s.ControlPlanes; i++ {
		name := kindNodeName(s.Name, "control-plane", i)
		if err := l.makeAuditDir(name); err != nil {
			return err
		}
		var extra map[string]string
		if i < len(s.ControlPlaneAPIServerArgs) {
			extra = s.ControlPlaneAPIServerArgs[i]
		}
		v := s.ControlPlaneVersion(i)
		if len(extra) == 0 && v.Equal(bootstrap) {
			continue
		}
		dir := l.patches(name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for file, body := range staticPodPatches(v, extra) {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// defaultAuditPolicy logs every request at Metadata level, so audit
// completeness can be counted for any resource.
const defaultAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:apiserver"]
  verbs: ["get"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: Metadata
`

// elapsed formats a duration for progress lines.
func elapsed(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
