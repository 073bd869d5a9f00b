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
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/lockbreaker/lockbreaker/system"
)

// layerDockerfile builds a system's own layer (system.Image) on the node image. It is not
// part of the node image's build context, so adding or changing a layer leaves the node
// image, and every run of the systems it serves, as it was.
//
//go:embed layer.Dockerfile
var layerDockerfile string

// SystemImageRef returns the reference of the image the nodes of system name run: the
// node image (ImageRef), or for a system with an image of its own
// lockbreaker-node-<system>:<hash>, where the hash covers the node image's reference, the
// layer's Dockerfile, its packages and its script. It does not check that the image
// exists; EnsureSystemImage does.
func SystemImageRef(name string) (string, error) {
	sys, err := system.Lookup(name)
	if err != nil {
		return "", err
	}
	if ref, own, err := ownImageRef(sys); own { // a system described in a file (own.go)
		return ref, err
	}
	if sys.Container == nil || sys.Container.Image == nil {
		return ImageRef(), nil
	}
	return nodeRepo + "-" + sys.Name + ":" + layerHash(ImageRef(), sys.Container.Image), nil
}

// layerHash is the tag of img's layer on base: a hash of base's reference, the layer's
// Dockerfile, its packages and its script.
func layerHash(base string, img *system.Image) string {
	h := sha256.New()
	for _, part := range []string{base, layerDockerfile, strings.Join(img.Packages, " "), img.Prepare} {
		fmt.Fprintf(h, "%d\x00%s", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// EnsureSystemImage makes sure the image the nodes of system name run exists and returns
// its reference: the node image (see EnsureImage), and on it the system's own layer when
// it has one, built only when missing (its packages come from the mirror the node image
// was built from).
func EnsureSystemImage(ctx context.Context, name string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if sys, err := system.Lookup(name); err == nil {
		if ref, own, err := ensureOwnImage(ctx, sys, progress); own { // a system described in a file (own.go)
			return ref, err
		}
	}
	base, err := EnsureImage(ctx, progress)
	if err != nil {
		return "", err
	}
	ref, err := SystemImageRef(name)
	if err != nil || ref == base {
		return ref, err
	}
	ensureMu.Lock()
	defer ensureMu.Unlock()
	cli, _ := docker()
	if ok, err := imageExists(ctx, cli, ref); err != nil || ok {
		return ref, err
	}
	sys, _ := system.Lookup(name) // found by SystemImageRef
	start := time.Now()
	fmt.Fprintf(progress, "building %s image %s on %s (once per image version)\n", name, ref, base)
	if err := buildLayer(ctx, cli, ref, base, sys.Container.Image, progress); err != nil {
		return "", fmt.Errorf("build %s image %s: %w", name, ref, err)
	}
	fmt.Fprintf(progress, "%s image %s built in %s\n", name, ref, time.Since(start).Round(time.Second))
	return ref, nil
}

// buildLayer builds ref from base and the layer's Dockerfile.
func buildLayer(ctx context.Context, cli *client.Client, ref, base string, img *system.Image, progress io.Writer) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(layerDockerfile))})
	if err == nil {
		_, err = tw.Write([]byte(layerDockerfile))
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	prepare := img.Prepare
	if prepare == "" {
		prepare = "true"
	}
	return buildImage(ctx, cli, ref, &buf, map[string]string{"BASE": base, "PACKAGES": strings.Join(img.Packages, " "), "PREPARE": prepare}, progress)
}
