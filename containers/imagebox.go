package containers

// Reading files out of an image without running it: a container created and never
// started, copied from, and removed.

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// imageBox is a container created (never started) from an image, to read its files.
type imageBox struct{ id string }

func openImage(ctx context.Context, ref string) (*imageBox, error) {
	cli, _ := docker()
	labels := ownerLabels("look-" + strconv.Itoa(os.Getpid()))
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: ref, Labels: labels, Entrypoint: []string{"/none"}, Cmd: nil}})
	if err != nil {
		return nil, fmt.Errorf("look into image %s: %w", ref, err)
	}
	return &imageBox{id: created.ID}, nil
}

func (b *imageBox) close() {
	cli, _ := docker()
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	_, _ = cli.ContainerRemove(ctx, b.id, client.ContainerRemoveOptions{Force: true})
}

// read returns the file at p, following symbolic links.
func (b *imageBox) read(ctx context.Context, p string) ([]byte, error) {
	cli, _ := docker()
	for range 10 {
		res, err := cli.CopyFromContainer(ctx, b.id, client.CopyFromContainerOptions{SourcePath: p})
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				return nil, fmt.Errorf("%s: no such file", p)
			}
			return nil, err
		}
		tr := tar.NewReader(res.Content)
		h, err := tr.Next()
		if err != nil {
			res.Content.Close()
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			res.Content.Close()
			if path.IsAbs(h.Linkname) {
				p = h.Linkname
			} else {
				p = path.Join(path.Dir(p), h.Linkname)
			}
			continue
		case tar.TypeReg:
			data, err := io.ReadAll(io.LimitReader(tr, 512<<20))
			res.Content.Close()
			return data, err
		}
		res.Content.Close()
		return nil, fmt.Errorf("%s is not a file", p)
	}
	return nil, fmt.Errorf("%s: too many symbolic links", p)
}

// program finds a program in the image as the engine would run it: an absolute path, or
// a name looked up in the image's PATH.
func (b *imageBox) program(ctx context.Context, name string, env []string) (string, []byte, error) {
	if strings.Contains(name, "/") {
		data, err := b.read(ctx, name)
		return name, data, err
	}
	dirs := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			dirs = v
		}
	}
	for _, dir := range strings.Split(dirs, ":") {
		if data, err := b.read(ctx, path.Join(dir, name)); err == nil {
			return path.Join(dir, name), data, nil
		}
	}
	return "", nil, fmt.Errorf("%s is not in the image's PATH", name)
}
