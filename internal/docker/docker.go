// Package docker is the little of the docker CLI skewer needs, as argv lists
// under a context.
package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skewer-k8s/skewer/internal/run"
)

// ErrNoEngine says no Docker engine answers.
var ErrNoEngine = errors.New("no Docker engine answers (start one, e.g. ../shared/env/docker-up)")

// Ping fails with ErrNoEngine when no engine answers.
func Ping(ctx context.Context) error {
	if _, err := run.Command("docker", "version", "--format", "{{.Server.Version}}").String(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	return nil
}

// ImageLabel returns the value of label on a local image, and whether the image exists.
func ImageLabel(ctx context.Context, ref, label string) (value string, exists bool) {
	out, err := run.Command("docker", "image", "inspect", "--format",
		fmt.Sprintf("{{index .Config.Labels %q}}", label), ref).String(ctx)
	if err != nil {
		return "", false
	}
	if out == "<no value>" {
		out = ""
	}
	return out, true
}

// ImageExists reports whether ref is a local image.
func ImageExists(ctx context.Context, ref string) bool {
	_, ok := ImageLabel(ctx, ref, "none")
	return ok
}

// ImageID is ref's image ID, the digest of its content.
func ImageID(ctx context.Context, ref string) (string, error) {
	return run.Command("docker", "image", "inspect", "--format", "{{.Id}}", ref).String(ctx)
}

// ServerVersion is the Docker engine's version.
func ServerVersion(ctx context.Context) (string, error) {
	return run.Command("docker", "version", "--format", "{{.Server.Version}}").String(ctx)
}

// RootDir is the engine's data folder (images, containers, volumes).
func RootDir(ctx context.Context) (string, error) {
	return run.Command("docker", "info", "--format", "{{.DockerRootDir}}").String(ctx)
}

// Import makes an image from a root filesystem tar stream.
func Import(ctx context.Context, rootfs io.Reader, ref string, changes ...string) error {
	args := []string{"docker", "import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	args = append(args, "-", ref)
	cmd := run.Command(args...)
	cmd.Stdin = rootfs
	return cmd.Run(ctx)
}

// ImportFiles makes an image holding only files (path -> content): what
// tests make on the spot to stand for an image without building one.
func ImportFiles(ctx context.Context, ref string, files map[string]string, changes ...string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return Import(ctx, &buf, ref, changes...)
}

// Save writes ref as a docker-archive tar to path.
func Save(ctx context.Context, ref, path string) error {
	return run.Command("docker", "save", "-o", path, ref).Run(ctx)
}

// Logs writes what container wrote to its stdout and stderr, each line
// with docker's timestamp, to w.
func Logs(ctx context.Context, container string, w io.Writer) error {
	cmd := run.Command("docker", "logs", "--timestamps", container)
	cmd.Log = w
	return cmd.Run(ctx)
}

// Tag adds target as a name of src.
func Tag(ctx context.Context, src, target string) error {
	return run.Command("docker", "tag", src, target).Run(ctx)
}

// Remove deletes containers by name or ID, with their anonymous volumes.
// A kill the engine sent but saw no exit of ("did not receive an exit
// event") is asked again, up to three times, after thawing every frozen
// cgroup v1 freezer under the containers: runc, failing to freeze a
// container it was setting up ("unable to freeze", on a loaded cgroup v1
// host), has been seen to leave that cgroup FROZEN, its `runc init` asleep
// in the refrigerator, where no SIGKILL reaches it and the node container
// can never stop.
func Remove(ctx context.Context, names ...string) error {
	var err error
	for try := 0; try < 3; try++ {
		err = run.Command(append([]string{"docker", "rm", "-f", "-v"}, names...)...).Run(ctx)
		if err == nil || !killPending(err) || ctx.Err() != nil {
			return err
		}
		for _, name := range names {
			if id, ierr := run.Command("docker", "inspect", "--format", "{{.Id}}", name).String(ctx); ierr == nil {
				thawFrozen(filepath.Join(freezerRoot, "docker", id))
			}
		}
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return err
		}
	}
	return err
}

// freezerRoot is the cgroup v1 freezer hierarchy, where Docker's cgroupfs
// driver puts a container under docker/<id>.
var freezerRoot = "/sys/fs/cgroup/freezer"

// thawFrozen writes THAWED to every freezer.state under dir that is not
// THAWED; a hierarchy that is not there (cgroup v2) or not writable (not
// root) is left as it is.
func thawFrozen(dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "freezer.state" {
			return nil
		}
		if state, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(state)) != "THAWED" {
			_ = os.WriteFile(path, []byte("THAWED"), 0o644)
		}
		return nil
	})
}

// killPending says the engine killed a container but had not seen it
// exit when it gave up waiting: "tried to kill container, but did not
// receive an exit event".
func killPending(err error) bool {
	return strings.Contains(err.Error(), "did not receive an exit event")
}

// Exec runs argv in a running container and returns its trimmed output.
// A cluster's nodes are reached through cluster.Node, which uses this.
func Exec(ctx context.Context, container string, argv ...string) (string, error) {
	return ExecInput(ctx, container, nil, argv...)
}

// ExecInput is Exec with stdin (none when nil).
func ExecInput(ctx context.Context, container string, stdin io.Reader, argv ...string) (string, error) {
	return execCmd(container, stdin, argv).String(ctx)
}

// ExecOutput is Exec returning the output as it is, untrimmed: a file's bytes.
func ExecOutput(ctx context.Context, container string, argv ...string) ([]byte, error) {
	return execCmd(container, nil, argv).Output(ctx)
}

// ExecDetached starts argv in a running container as user and returns
// once it has started (docker exec -d): a server that runs on in the
// container after the call.
func ExecDetached(ctx context.Context, container, user string, argv ...string) error {
	return execCmd(container, nil, argv, "-d", "--user", user).Run(ctx)
}

// ExecStream runs argv in a running container, its standard output going
// to w as it comes (a follower), stdin given (none when nil).
func ExecStream(ctx context.Context, container string, stdin io.Reader, w io.Writer, argv ...string) error {
	return execCmd(container, stdin, argv).Stream(ctx, w)
}

// execCmd is every exec into a container: docker exec with flags, -i
// when there is a stdin.
func execCmd(container string, stdin io.Reader, argv []string, flags ...string) *run.Cmd {
	args := append([]string{"docker", "exec"}, flags...)
	if stdin != nil {
		args = append(args, "-i")
	}
	cmd := run.Command(append(append(args, container), argv...)...)
	cmd.Stdin = stdin
	return cmd
}

// Copy copies a host path into a container (docker cp semantics).
func Copy(ctx context.Context, src, container, dst string) error {
	return run.Command("docker", "cp", src, container+":"+dst).Run(ctx)
}

// RemoveImages removes every local image whose label is set, and nothing
// else, and returns what it removed (or, with dryRun, would remove). An
// image with several names loses each of them; one without a name goes by
// its ID.
func RemoveImages(ctx context.Context, label string, dryRun bool) ([]string, error) {
	images, err := Images(ctx, label)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, i := range images {
		ref := i.Ref
		if strings.Contains(ref, "<none>") {
			ref = i.ID
		}
		if !dryRun {
			if err := run.Command("docker", "image", "rm", ref).Run(ctx); err != nil {
				return gone, err
			}
		}
		gone = append(gone, ref)
	}
	return gone, nil
}

// Images lists local images whose label is set.
func Images(ctx context.Context, label string) ([]Image, error) {
	out, err := run.Command("docker", "image", "ls", "--filter", "label="+label,
		"--format", "{{.Repository}}:{{.Tag}}\t{{.ID}}\t{{.Size}}\t{{.CreatedSince}}").String(ctx)
	if err != nil || out == "" {
		return nil, err
	}
	var images []Image
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("unexpected docker image ls line %q", line)
		}
		images = append(images, Image{Ref: f[0], ID: f[1], Size: f[2], Created: f[3]})
	}
	return images, nil
}

// Image is one local image as docker image ls shows it.
type Image struct {
	Ref     string `json:"ref"`
	ID      string `json:"id"`
	Size    string `json:"size"`
	Created string `json:"created"`
}

// Containers lists the names of the containers, running or not, that
// filter (docker's --filter syntax) selects, sorted.
func Containers(ctx context.Context, filter string) ([]string, error) {
	out, err := run.Command("docker", "ps", "-a", "--filter", filter, "--format", "{{.Names}}").String(ctx)
	if err != nil || out == "" {
		return nil, err
	}
	names := strings.Split(out, "\n")
	sort.Strings(names)
	return names, nil
}
