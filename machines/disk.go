package machines

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/lazydisk"
	"github.com/lockbreaker/lockbreaker/nodes"
)

// Disks on machines: a node's data directory served by lockbreaker's own disk daemon on
// its machine (this very program, copied there), over what the directory held when the
// node was prepared. Paths are its container recipe's, which the node's commands move
// under its directory.
const (
	diskProgram = nodeRoot + "lockbreaker-disk"
	diskDir     = nodeRoot + "disk"
)

// releaseDisk, run with a node's directory as $1, kills its disk's daemon (the pidfile's
// process, when it serves that disk) and unmounts every disk of lockbreaker's under the
// directory: what a stop, and a clean after SIGKILL, do before the directory goes.
const releaseDisk = `d="$1/disk"
if [ -f "$d/disk.pid" ]; then
	p=$(cat "$d/disk.pid")
	grep -q disk.sock "/proc/$p/cmdline" 2>/dev/null && kill -KILL "$p"
fi
grep " fuse.lockbreaker-disk " /proc/mounts | cut -d" " -f2 | while read -r m; do
	case "$m" in "$1"/*) umount -l "$m" ;; esac
done
true`

// withDisk gives node n a disk at data, its recipe's data directory.
func (n node) withDisk(data string) node {
	n.disk = &nodes.Disk{Dir: diskDir, At: data, Do: func(ctx context.Context, args ...string) (string, error) {
		return n.Run(ctx, append([]string{"env", lazydisk.ServeEnv + "=1", diskProgram}, args...)...)
	}}
	return n
}

// serveDisk copies this program to the node's machine, moves what its data directory holds
// to the disk's durable copy, and serves the disk in its place.
func (n node) serveDisk(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	program, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	if err := n.m.SudoWrite(ctx, n.move(diskProgram), program, 0o755); err != nil {
		return fmt.Errorf("copy lockbreaker to node %s's machine: %w", n.name, err)
	}
	data, backing := shellwords.Quote(n.move(n.disk.Mount())), shellwords.Quote(n.move(n.disk.Backing()))
	script := []string{
		"set -e", "mkdir -p " + shellwords.Quote(n.move(diskDir)),
		fmt.Sprintf("if [ -d %s ]; then mv %s %s; else mkdir -m 0700 %s; fi", data, data, backing, backing),
		"mkdir " + data, fmt.Sprintf("chown --reference=%s %s", backing, data), fmt.Sprintf("chmod --reference=%s %s", backing, data),
	}
	if _, err := n.m.Sudo(ctx, strings.Join(script, "\n")); err != nil {
		return fmt.Errorf("node %s's disk: %w", n.name, err)
	}
	if err := n.disk.Serve(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	return nil
}

func (n node) Disk() *nodes.Disk { return n.disk }
