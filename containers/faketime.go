package containers

// libfaketime in a local image: whether it can move the clock of the program the image
// runs (looked at in the image, never run), and the files and environment that preload it.

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/clockable"
	"github.com/lockbreaker/lockbreaker/system"
)

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
