package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
)

// Systems described in a file (package sysfile) run a team's own software: a layer of
// Debian packages and copied files on the node image, built with ownDockerfile, or an
// image the engine already has, run as it is. Such an image may lack everything the node
// image brings (a shell, iptables, libfaketime, the entry point), so the faults reach it
// from outside: signals and kills through the engine (as for every node), partitions
// from the host in the container's network namespace (nsenter, the host's iptables), and
// a clock moved by libfaketime that the harness copies in and preloads through the
// container's environment, its offset file written from the host (/proc/<pid>/root).

// ownDockerfile builds a system file's layer on the node image: its packages (if any),
// its copied files (the build context's files/ directory) and its prepare script.
//
//go:embed own.Dockerfile
var ownDockerfile string

// ownImageRef is the image of a system described in a file, ok false for a built-in one:
// its local image, the node image when it has no layer, or
// lockbreaker-own-<name>:<hash> over the node image's reference, the Dockerfile, the
// packages, the script and the copied files' paths, modes and contents.
func ownImageRef(sys system.System) (ref string, ok bool, err error) {
	if system.BuiltIn(sys.Name) || sys.Container == nil {
		return "", false, nil
	}
	img := sys.Container.Image
	switch {
	case img == nil:
		return ImageRef(), true, nil
	case img.Local != "":
		return img.Local, true, nil
	}
	h := sha256.New()
	for _, part := range []string{ImageRef(), ownDockerfile, strings.Join(img.Packages, " "), img.Prepare} {
		fmt.Fprintf(h, "%d\x00%s", len(part), part)
	}
	for _, c := range img.Copy {
		b, err := os.ReadFile(c.From)
		if err != nil {
			return "", true, fmt.Errorf("system %s: copy: %w", sys.Name, err)
		}
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", c.To, c.Mode, len(b))
		h.Write(b)
	}
	return "lockbreaker-own-" + sys.Name + ":" + hex.EncodeToString(h.Sum(nil))[:12], true, nil
}

// ensureOwnImage makes sure the image of a system described in a file exists: a local
// image must (it is never pulled), a layer is built when missing. ok is false for a
// built-in system.
func ensureOwnImage(ctx context.Context, sys system.System, progress io.Writer) (ref string, ok bool, err error) {
	ref, ok, err = ownImageRef(sys)
	if !ok || err != nil {
		return ref, ok, err
	}
	if img := sys.Container.Image; img != nil && img.Local != "" {
		return ref, true, checkLocalImage(ctx, img.Local)
	}
	base, err := EnsureImage(ctx, progress)
	if err != nil || ref == base {
		return ref, true, err
	}
	ensureMu.Lock()
	defer ensureMu.Unlock()
	cli, _ := docker()
	if exists, err := imageExists(ctx, cli, ref); err != nil || exists {
		return ref, true, err
	}
	start := time.Now()
	fmt.Fprintf(progress, "building %s image %s on %s (once per image version)\n", sys.Name, ref, base)
	buildCtx, err := ownContext(sys.Container.Image)
	if err == nil {
		prepare := sys.Container.Image.Prepare
		if prepare == "" {
			prepare = "true"
		}
		err = buildImage(ctx, cli, ref, buildCtx, map[string]string{"BASE": base,
			"PACKAGES": strings.Join(sys.Container.Image.Packages, " "), "PREPARE": prepare}, progress)
	}
	if err != nil {
		return "", true, fmt.Errorf("build %s image %s: %w", sys.Name, ref, err)
	}
	fmt.Fprintf(progress, "%s image %s built in %s\n", sys.Name, ref, time.Since(start).Round(time.Second))
	return ref, true, nil
}

// ownContext is a layer's build context: the Dockerfile and files/<path> for each copy.
func ownContext(img *system.Image) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, b []byte) error {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	err := add(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(ownDockerfile))}, []byte(ownDockerfile))
	if err == nil {
		err = add(&tar.Header{Name: "files/", Mode: 0o755, Typeflag: tar.TypeDir}, nil)
	}
	for _, c := range img.Copy {
		if err != nil {
			break
		}
		var b []byte
		if b, err = os.ReadFile(c.From); err == nil {
			err = add(&tar.Header{Name: "files" + c.To, Mode: c.Mode, Size: int64(len(b))}, b)
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return &buf, nil
}

// checkLocalImage refuses an image the engine does not have: it is never pulled.
func checkLocalImage(ctx context.Context, ref string) error {
	if err := Ping(ctx); err != nil {
		return err
	}
	cli, _ := docker()
	switch ok, err := imageExists(ctx, cli, ref); {
	case err != nil:
		return err
	case !ok:
		return unfit("image %s is not in the engine: build it or load it (docker load) first; lockbreaker never pulls a system file's image", quote.Short(ref))
	}
	return nil
}
