package containers

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/lockbreaker/lockbreaker/system"
)

// nodeFiles is the node image's build context: the Dockerfile and the files it
// copies. Embedding it keeps the binary self-contained; its hash names the image.
//
//go:embed Dockerfile node
var nodeFiles embed.FS

const (
	nodeRepo = "lockbreaker-node"
	// debianSlim is used as the base when the engine has it (or can pull it).
	debianSlim = "debian:bookworm-slim"
	// nodeDir is where the node's files are in the image (the Dockerfile's COPY).
	nodeDir = "lockbreaker"
	// mirrorEnv overrides the Debian mirror read from the host's apt sources.
	mirrorEnv = "LOCKBREAKER_APT_MIRROR"
)

// ImageRef returns the node image's reference, lockbreaker-node:<hash>, where
// the hash covers its packages, the embedded Dockerfile and the files it copies.
// It does not check that the image exists; EnsureImage does.
func ImageRef() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\x00", system.NodePackages)
	err := eachNodeFile(func(path string, b []byte) error {
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		_, err := h.Write(b)
		return err
	})
	if err != nil {
		panic("containers: embedded node files: " + err.Error()) // cannot happen: the FS is compiled in
	}
	return nodeRepo + ":" + hex.EncodeToString(h.Sum(nil))[:12]
}

// eachNodeFile calls f on every embedded build-context file, in lexical order.
func eachNodeFile(f func(path string, content []byte) error) error {
	return fs.WalkDir(nodeFiles, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := nodeFiles.ReadFile(path)
		if err != nil {
			return err
		}
		return f(path, b)
	})
}

// fileMode is the mode a node file has in the image: a script is executable.
func fileMode(content []byte) fs.FileMode {
	if bytes.HasPrefix(content, []byte("#!")) {
		return 0o755
	}
	return 0o644
}

var ensureMu sync.Mutex

// EnsureImage makes sure the node image exists and returns its reference. The
// image is made only when no image with the current content hash exists, which
// takes a minute or so (Debian packages) and reports progress as short lines to
// progress (nil discards them).
//
// It is made, in order: from debian:bookworm-slim and the Dockerfile when the
// engine has that image; whole, with mmdebstrap (needs root and the mmdebstrap
// package), from the host's Debian mirror, and imported; finally from
// debian:bookworm-slim pulled. The mirror is the first bookworm source in the
// host's apt sources, or $LOCKBREAKER_APT_MIRROR.
func EnsureImage(ctx context.Context, progress io.Writer) (ref string, err error) {
	if progress == nil {
		progress = io.Discard
	}
	ensureMu.Lock()
	defer ensureMu.Unlock()
	if err := Ping(ctx); err != nil {
		return "", err
	}
	cli, _ := docker()
	ref = ImageRef()
	if ok, err := imageExists(ctx, cli, ref); err != nil || ok {
		return ref, err
	}
	start := time.Now()
	fmt.Fprintf(progress, "making node image %s (once per image version; takes a minute or so)\n", ref)
	if err := makeNode(ctx, cli, ref, progress); err != nil {
		return "", fmt.Errorf("node image %s: %w", ref, err)
	}
	fmt.Fprintf(progress, "node image %s made in %s\n", ref, time.Since(start).Round(time.Second))
	return ref, nil
}

func imageExists(ctx context.Context, cli *client.Client, ref string) (bool, error) {
	_, err := cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return true, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
}

// makeNode makes the node image ref in the first way EnsureImage names that this host has.
func makeNode(ctx context.Context, cli *client.Client, ref string, progress io.Writer) error {
	mirror, mirrorErr := aptMirror()
	if ok, err := imageExists(ctx, cli, debianSlim); err != nil || ok {
		if err != nil {
			return err
		}
		return buildNode(ctx, cli, ref, mirror, progress)
	}
	_, lookErr := exec.LookPath("mmdebstrap")
	switch {
	case lookErr == nil && os.Geteuid() == 0 && mirrorErr == nil:
		return bootstrapNode(ctx, cli, ref, mirror, progress)
	case lookErr == nil && os.Geteuid() == 0:
		return fmt.Errorf("mmdebstrap: %w", mirrorErr)
	}
	fmt.Fprintf(progress, "pulling %s (mmdebstrap needs root and the mmdebstrap package)\n", debianSlim)
	if err := pull(ctx, cli, debianSlim); err != nil {
		return fmt.Errorf("no base image: %s is not local and cannot be pulled (%w), and mmdebstrap needs to be run as root",
			debianSlim, err)
	}
	return buildNode(ctx, cli, ref, mirror, progress)
}

func pull(ctx context.Context, cli *client.Client, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	resp, err := cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	return readJSONStream(resp, io.Discard)
}

// bootstrapNode makes the node image ref whole with mmdebstrap: a minbase Debian bookworm
// from mirror with the node's packages and files, imported into the engine as mmdebstrap
// writes it. Nothing is built on it, so no base image is made or kept.
func bootstrapNode(ctx context.Context, cli *client.Client, ref, mirror string, progress io.Writer) error {
	dir, err := os.MkdirTemp("", "lockbreaker-node-")
	if err != nil {
		return fmt.Errorf("mmdebstrap: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := writeNodeFiles(filepath.Join(dir, nodeDir)); err != nil {
		return fmt.Errorf("mmdebstrap: node files: %w", err)
	}

	fmt.Fprintf(progress, "installing %s with mmdebstrap from %s\n", strings.Join(system.NodePackages, " "), mirror)
	out := newProgressLines(progress, "  mmdebstrap: ", func(s string) bool {
		return strings.HasPrefix(s, "E:") || strings.HasPrefix(s, "W:")
	})
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--mode=root", "--variant=minbase",
		"--include="+strings.Join(system.NodePackages, ","), "--customize-hook=copy-in "+filepath.Join(dir, nodeDir)+" /",
		"bookworm", "-", mirror)
	cmd.Stderr = out
	rootfs, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("mmdebstrap: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mmdebstrap: %w", err)
	}
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: rootfs, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{
			"LABEL " + LabelProject + "=1",
			"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			`ENTRYPOINT ["/` + nodeDir + `/run"]`,
		}})
	if err == nil {
		err = readJSONStream(resp, io.Discard)
		resp.Close()
	}
	if err != nil {
		cmd.Process.Kill() // nobody reads its output any more: it would block for ever
	}
	if waitErr := cmd.Wait(); err == nil && waitErr != nil {
		err = fmt.Errorf("mmdebstrap: %w; last output:\n%s", waitErr, out.Tail())
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	return nil
}

// writeNodeFiles writes the files the Dockerfile copies into dir, as the image holds them.
func writeNodeFiles(dir string) error {
	return eachNodeFile(func(path string, b []byte) error {
		rel, ok := strings.CutPrefix(path, "node/")
		if !ok {
			return nil // the Dockerfile
		}
		target := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, b, fileMode(b))
	})
}

// buildNode builds the node image from debianSlim and the embedded build context.
func buildNode(ctx context.Context, cli *client.Client, ref, mirror string, progress io.Writer) error {
	buildCtx, err := contextTar()
	if err != nil {
		return err
	}
	err = buildImage(ctx, cli, ref, buildCtx, map[string]string{
		"BASE": debianSlim, "APT_MIRROR": mirror, "PACKAGES": strings.Join(system.NodePackages, " ")}, progress)
	if err != nil {
		return fmt.Errorf("build from %s: %w", debianSlim, err)
	}
	return nil
}

// buildImage builds ref from a build context whose Dockerfile takes args, shows the
// build's steps, and checks that it made ref.
func buildImage(ctx context.Context, cli *client.Client, ref string, buildCtx io.Reader, args map[string]string, progress io.Writer) error {
	buildArgs := map[string]*string{}
	for k, v := range args {
		buildArgs[k] = &v
	}
	resp, err := cli.ImageBuild(ctx, buildCtx, client.ImageBuildOptions{
		Tags:        []string{ref},
		Dockerfile:  "Dockerfile",
		BuildArgs:   buildArgs,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels:      map[string]string{LabelProject: "1"},
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out := newProgressLines(progress, "  build: ", func(s string) bool {
		return strings.HasPrefix(s, "Step ") || strings.HasPrefix(s, "E:")
	})
	if err := readJSONStream(resp.Body, out); err != nil {
		return fmt.Errorf("%w; last output:\n%s", err, out.Tail())
	}
	if ok, err := imageExists(ctx, cli, ref); err != nil || !ok {
		return fmt.Errorf("image missing after build: %v", err)
	}
	return nil
}

// contextTar returns the embedded build context as a tar stream.
func contextTar() (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := eachNodeFile(func(path string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: path, Mode: int64(fileMode(b)), Size: int64(len(b))}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return &buf, nil
}

// readJSONStream reads the engine's JSON message stream (build, pull,
// import), writes its text to out and returns the first error it reports.
func readJSONStream(r io.Reader, out io.Writer) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read engine output: %w", err)
		}
		if m.Error != nil {
			return errors.New(strings.TrimSpace(m.Error.Message))
		}
		if m.Stream != "" {
			io.WriteString(out, m.Stream)
		}
	}
}

// progressLines condenses a chatty line stream (debootstrap, apt inside a
// build) for a terminal: lines for which keep returns true are printed, the
// others at most one every progressEvery, so a user sees the work is alive.
// The last lines are kept for error messages.
type progressLines struct {
	w       io.Writer
	prefix  string
	keep    func(string) bool
	last    time.Time
	partial []byte
	tail    []string
}

const (
	progressEvery = 10 * time.Second
	tailLines     = 20
)

func newProgressLines(w io.Writer, prefix string, keep func(string) bool) *progressLines {
	return &progressLines{w: w, prefix: prefix, keep: keep, last: time.Now()}
}

func (p *progressLines) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.line(string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
}

func (p *progressLines) line(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	p.tail = append(p.tail, s)
	if len(p.tail) > tailLines {
		p.tail = p.tail[1:]
	}
	if !p.keep(s) && time.Since(p.last) < progressEvery {
		return
	}
	p.last = time.Now()
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	fmt.Fprintf(p.w, "%s%s\n", p.prefix, s)
}

// Tail returns the last lines seen, for error messages.
func (p *progressLines) Tail() string {
	return strings.Join(p.tail, "\n")
}

// aptMirror returns the host's Debian mirror: $LOCKBREAKER_APT_MIRROR, else
// the first deb source for bookworm in the host's apt sources (deb822
// *.sources files and one-line sources.list files), else the first deb source.
func aptMirror() (string, error) {
	if m := strings.TrimSpace(os.Getenv(mirrorEnv)); m != "" {
		return m, nil
	}
	var sources []aptSource
	deb822, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range deb822 {
		if b, err := os.ReadFile(f); err == nil {
			sources = append(sources, parseDeb822(string(b))...)
		}
	}
	oneLine, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	for _, f := range append([]string{"/etc/apt/sources.list"}, oneLine...) {
		if b, err := os.ReadFile(f); err == nil {
			sources = append(sources, parseOneLine(string(b))...)
		}
	}
	for _, s := range sources {
		if slices.Contains(s.suites, "bookworm") {
			return s.uri, nil
		}
	}
	if len(sources) > 0 {
		return sources[0].uri, nil
	}
	return "", fmt.Errorf("no Debian mirror found in /etc/apt/sources.list{,.d}: set %s", mirrorEnv)
}

type aptSource struct {
	uri    string
	suites []string
}

// parseDeb822 reads the "deb" entries of a deb822 .sources file.
func parseDeb822(text string) []aptSource {
	var out []aptSource
	for _, stanza := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		key := ""
		for _, line := range strings.Split(stanza, "\n") {
			switch {
			case strings.HasPrefix(line, "#"):
			case (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && key != "":
				fields[key] += " " + strings.TrimSpace(line)
			default:
				k, v, ok := strings.Cut(line, ":")
				if !ok {
					continue
				}
				key = strings.ToLower(strings.TrimSpace(k))
				fields[key] = strings.TrimSpace(v)
			}
		}
		if !slices.Contains(strings.Fields(fields["types"]), "deb") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			out = append(out, aptSource{uri: uri, suites: strings.Fields(fields["suites"])})
		}
	}
	return out
}

// parseOneLine reads the "deb" lines of a one-line-style sources.list:
// deb [options] uri suite component...
func parseOneLine(text string) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 {
			out = append(out, aptSource{uri: f[0], suites: f[1:2]})
		}
	}
	return out
}
