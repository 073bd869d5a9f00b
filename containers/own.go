package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/lockbreaker/lockbreaker/internal/clockable"
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

// UnfitError says a system cannot run here as the run asks, found before anything
// starts (its image is not in the engine, a fault it cannot take): bad input.
type UnfitError struct{ Reason string }

func (e *UnfitError) Error() string { return e.Reason }

func unfit(format string, args ...any) error {
	return &UnfitError{Reason: fmt.Sprintf(format, args...)}
}

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

// CheckSystem says, before anything starts, why a system described in a file cannot run
// here with the faults asked for: its local image is missing, its nodes' clocks cannot be
// moved (clocks), or this host cannot cut its network from outside (network). Built-in
// systems pass: the node image has what their faults need.
func CheckSystem(ctx context.Context, sys system.System, clocks, network bool) error {
	img := sys.Container.Image
	if system.BuiltIn(sys.Name) || sys.Container == nil || img == nil || img.Local == "" {
		return nil
	}
	if err := checkLocalImage(ctx, img.Local); err != nil {
		return err
	}
	if network {
		if err := hostNetwork(); err != nil {
			return unfit("partitions of system %s's image %s are made from this host, and %v", sys.Name, img.Local, err)
		}
	}
	if clocks {
		if err := hostNetwork(); err != nil { // the clock file is written from the host too
			return unfit("clock faults on system %s's image %s are set from this host, and %v", sys.Name, img.Local, err)
		}
		plan, err := faketimeFor(ctx, sys)
		if err != nil {
			return err
		}
		if plan.refused != "" {
			return unfit("clock faults cannot apply to system %s: %s", sys.Name, plan.refused)
		}
	}
	return nil
}

// local reports whether the cluster runs a local image of its own rather than the node
// image or a layer on it.
func (c *Cluster) local() bool {
	img := c.recipe.Image
	return img != nil && img.Local != "" && !system.BuiltIn(c.spec.System)
}

// hostTools are what faults made from outside a node run on this host.
var hostTools = []string{"nsenter", "iptables"}

var (
	hostOnce sync.Once
	hostErr  error
)

// hostNetwork says why this host cannot reach into a node's network namespace; nil when
// it can (root, nsenter and iptables).
func hostNetwork() error {
	hostOnce.Do(func() {
		if os.Geteuid() != 0 {
			hostErr = errors.New("that needs lockbreaker to run as root")
			return
		}
		for _, tool := range hostTools {
			if _, err := exec.LookPath(tool); err != nil {
				hostErr = fmt.Errorf("that needs %s on this host", tool)
				return
			}
		}
	})
	return hostErr
}

// nodePID is the host's process id of node n's first process, checked to be that node's:
// the engine's process ids are this host's only when lockbreaker shares the engine's
// process namespace, and a node's host name (its own /etc/hostname) tells.
func (c *Cluster) nodePID(ctx context.Context, n Node) (int, error) {
	cli, _ := docker()
	var info client.ContainerInspectResult
	err := engineCall(ctx, "inspect node "+n.Name, func(ctx context.Context, _ bool) (err error) {
		info, err = cli.ContainerInspect(ctx, n.ContainerID, client.ContainerInspectOptions{})
		return err
	})
	if err != nil {
		return 0, err
	}
	st := info.Container.State
	if st == nil || st.Pid == 0 {
		return 0, fmt.Errorf("node %s is not running", n.Name)
	}
	host, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/hostname", st.Pid))
	if err != nil || strings.TrimSpace(string(host)) != n.Name {
		return 0, fmt.Errorf("node %s: process %d is not this host's (lockbreaker and the engine do not share processes): %v", n.Name, st.Pid, err)
	}
	return st.Pid, nil
}

// hostRun runs a command on this host and returns its output. It makes or heals a fault,
// so it has a deadline of its own, engineTimeout, which ctx's end does not cut
// (ownDeadline); it is not the engine's, so it is not tried again.
func hostRun(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := ownDeadline(ctx)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// fromHost reports whether this cluster's partitions are made from this host: when it
// has the tools (hostNetwork) and reaches into the nodes' processes (sharesProcesses). A
// local image of a system file always is (CheckSystem refused it otherwise): it may have
// no iptables of its own.
func (c *Cluster) fromHost(ctx context.Context) bool {
	return c.local() || hostNetwork() == nil && c.sharesProcesses(ctx)
}

// sharesProcesses reports whether this host reaches into the nodes' processes, their
// files and namespaces (/proc/PID): when lockbreaker runs as root and the engine's
// processes are this host's, decided once, on the first running node. A local image's
// nodes always are reached so (CheckSystem refused it otherwise).
func (c *Cluster) sharesProcesses(ctx context.Context) bool {
	if c.local() {
		return true
	}
	c.hostOnce.Do(func() {
		if os.Geteuid() != 0 {
			return
		}
		for _, n := range c.running() {
			_, err := c.nodePID(ctx, n)
			c.hostProcs = err == nil
			return
		}
	})
	return c.hostProcs
}

// inNetns runs an iptables command in node n's network namespace, from this host.
func (c *Cluster) inNetns(ctx context.Context, n Node, args ...string) error {
	pid, err := c.nodePID(ctx, n)
	if err != nil {
		return err
	}
	_, err = hostRun(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w"}, args...)...)
	return err
}

// faketimeDir is where the harness puts libfaketime and the clock offset file in a node
// of a local image.
const faketimeDir = "/lockbreaker-faketime"

// faketimePlan is how a local image's nodes run under libfaketime, or why they cannot.
type faketimePlan struct {
	refused string
	lib     []byte   // libfaketimeMT.so.1, from the node image
	preload []string // LD_PRELOAD's paths in the node
}

var (
	plansMu sync.Mutex
	plans   = map[string]faketimePlan{}
)

// gnuArch is Debian's multiarch directory of this machine's architecture.
func gnuArch() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// faketimeFor looks into a local image (without running it) for the program its nodes
// run and decides whether libfaketime can move its clock: a dynamically linked glibc
// program, not Go, whose glibc defines every symbol version the harness's libfaketime
// (the node image's) needs. glibc's own malloc is preloaded first when the image has its
// debug shim, as in the node image (libfaketime deadlocks with jemalloc).
func faketimeFor(ctx context.Context, sys system.System) (faketimePlan, error) {
	ref := sys.Container.Image.Local
	plansMu.Lock()
	defer plansMu.Unlock()
	if p, ok := plans[ref]; ok {
		return p, nil
	}
	cli, _ := docker()
	inspected, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return faketimePlan{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	cfg := inspected.Config
	program := ""
	if setup := sys.Container.Node(system.Cluster{Nodes: 1, TTL: time.Second}, 1); len(setup.Cmd) > 0 {
		program = setup.Cmd[0]
	} else if cfg != nil && len(cfg.Entrypoint) > 0 {
		program = cfg.Entrypoint[0]
	} else if cfg != nil && len(cfg.Cmd) > 0 {
		program = cfg.Cmd[0]
	}
	var env []string
	if cfg != nil {
		env = cfg.Env
	}
	plan, err := lookIntoImage(ctx, ref, program, env)
	if err != nil {
		return faketimePlan{}, err
	}
	plans[ref] = plan
	return plan, nil
}

func lookIntoImage(ctx context.Context, ref, program string, env []string) (faketimePlan, error) {
	if program == "" {
		return faketimePlan{refused: "its nodes' program is not known (no command, and the image has no entry point)"}, nil
	}
	box, err := openImage(ctx, ref)
	if err != nil {
		return faketimePlan{}, err
	}
	defer box.close()
	for range 4 { // a script's interpreter, a script's...
		resolved, b, err := box.program(ctx, program, env)
		if err != nil {
			return faketimePlan{refused: fmt.Sprintf("%s is not in image %s (%v)", program, ref, err)}, nil
		}
		if why := clockable.Why(resolved, b); why != "" {
			return faketimePlan{refused: why}, nil
		}
		if interp := clockable.Interpreter(b); interp != "" {
			program = interp
			continue
		}
		break
	}
	arch := gnuArch()
	var libc []byte
	for _, p := range []string{"/lib/" + arch + "/libc.so.6", "/usr/lib/" + arch + "/libc.so.6", "/lib64/libc.so.6"} {
		if libc, err = box.read(ctx, p); err == nil {
			break
		}
	}
	if libc == nil {
		return faketimePlan{refused: "image " + ref + " has no glibc (libc.so.6), which libfaketime needs"}, nil
	}
	node, err := openImage(ctx, ImageRef())
	if err != nil {
		return faketimePlan{}, fmt.Errorf("libfaketime from the node image: %w", err)
	}
	defer node.close()
	lib, err := node.read(ctx, "/usr/lib/"+arch+"/faketime/libfaketimeMT.so.1")
	if err != nil {
		return faketimePlan{}, fmt.Errorf("libfaketime from the node image: %w", err)
	}
	missing, err := clockable.MissingVersions(lib, libc)
	if err != nil {
		return faketimePlan{}, err
	}
	if len(missing) > 0 {
		return faketimePlan{refused: fmt.Sprintf("the glibc of image %s lacks %s, which the harness's libfaketime needs", ref, strings.Join(missing, ", "))}, nil
	}
	plan := faketimePlan{lib: lib}
	for _, p := range []string{"/usr/lib/" + arch + "/libc_malloc_debug.so.0", "/lib/" + arch + "/libc_malloc_debug.so.0"} {
		if _, err := box.read(ctx, p); err == nil {
			plan.preload = append(plan.preload, p)
			break
		}
	}
	plan.preload = append(plan.preload, faketimeDir+"/libfaketimeMT.so.1")
	return plan, nil
}

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

// localSetup adjusts a node's container request for a local image: its command replaces
// the image's entry point, and under faked clocks libfaketime and the offset file are
// copied in and preloaded through the environment.
func (c *Cluster) localSetup(ctx context.Context, cmd []string, env map[string]string) (entrypoint []string, files []system.File, err error) {
	delete(env, "LOCKBREAKER_FAKETIME")
	if !c.spec.Faketime {
		return cmd, nil, nil
	}
	sys, err := system.Lookup(c.spec.System)
	if err != nil {
		return nil, nil, err
	}
	plan, err := faketimeFor(ctx, sys)
	if err != nil {
		return nil, nil, err
	}
	if plan.refused != "" {
		return nil, nil, fmt.Errorf("clock faults: %s", plan.refused)
	}
	env["LD_PRELOAD"] = strings.Join(plan.preload, ":")
	env["FAKETIME_TIMESTAMP_FILE"] = faketimeDir + "/offset"
	env["FAKETIME_NO_CACHE"], env["FAKETIME_DONT_FAKE_MONOTONIC"], env["FAKETIME_FORCE_MONOTONIC_FIX"] = "1", "1", "0"
	return cmd, []system.File{
		{Path: faketimeDir + "/libfaketimeMT.so.1", Content: string(plan.lib)},
		{Path: faketimeDir + "/offset", Content: "+0"},
	}, nil
}

// setClockFromHost writes node n's clock offset file, at path in the node, from this
// host, through the node's root directory as the host sees it: a new file renamed over the
// old one, so the server never reads it half written.
func (c *Cluster) setClockFromHost(ctx context.Context, n Node, path, seconds string) error {
	pid, err := c.nodePID(ctx, n)
	if err != nil {
		return err
	}
	file := fmt.Sprintf("/proc/%d/root%s", pid, path)
	// A temporary file of this call's own: two settings at once must not rename each
	// other's away.
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".new.*")
	if err != nil {
		return fmt.Errorf("set clock of node %s: %w", n.Name, err)
	}
	_, err = tmp.WriteString(seconds)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("set clock of node %s: %w", n.Name, err)
	}
	return nil
}

// probeIn runs a probe command in node n (readiness, role) within a few seconds.
func probeIn(ctx context.Context, n Node, cmd []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return execIn(ctx, n.ContainerID, slices.Clone(cmd))
}
