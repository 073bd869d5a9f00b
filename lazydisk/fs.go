package lazydisk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FSType is the filesystem type of every mount of ours, "fuse."+FSType in
// /proc/self/mountinfo, by which Mounts finds them.
const FSType = "lockbreaker-disk"

// stashName is the directory at the backing root that keeps what pending directory
// changes took away. It is hidden from the served tree.
const stashName = ".lazydisk-stash"

// Options say what to serve where.
type Options struct {
	Backing string // the directory that holds the durable state
	Mount   string // the empty directory to serve it on
	Debug   bool   // log every FUSE request
}

// FS is a mounted lazy disk.
type FS struct {
	backing, mount string
	server         *fuse.Server
	root           *fs.Inode
	rootDev        uint64

	// mu is held to read by every request while it works and to write by Drop, so that
	// a drop sees no request half done.
	mu      sync.RWMutex
	filesMu sync.Mutex
	files   map[uint64]*file // by key (stableAttr), the files open or with pending data
	entries *entries
	gate    *gate
	opens   door

	syncs, written, synced, dirty atomic.Int64

	unmountOnce sync.Once
	unmountErr  error
}

// LostFile is the pending data of one file that a Drop discarded.
type LostFile struct {
	Path  string `json:"path"`  // relative to the root, as it was when first written since its last sync
	Bytes int64  `json:"bytes"` // the bytes written and dropped; 0 for a dropped truncate alone
}

// Lost is what a Drop discarded.
type Lost struct {
	Files   []LostFile `json:"files"`
	Entries []string   `json:"entries"` // the directory changes undone, in the order they were made
}

// Stats are counters since the mount.
type Stats struct {
	Syncs          int64         `json:"syncs"`           // fsync, fdatasync and fsyncdir answered
	SyncDelay      time.Duration `json:"sync_delay"`      // how long each sync waits now (SetSyncDelay)
	SyncsWaiting   int64         `json:"syncs_waiting"`   // syncs held back by the delay now
	BytesWritten   int64         `json:"bytes_written"`   // written through the mount
	BytesSynced    int64         `json:"bytes_synced"`    // written to the backing directory by syncs
	DirtyBytes     int64         `json:"dirty_bytes"`     // held in memory now, lost by a Drop
	PendingEntries int           `json:"pending_entries"` // directory changes a Drop would undo now
}

// Mount serves opts.Backing on opts.Mount until Unmount. It fails at once when /dev/fuse
// is missing or the mount point is a mount already.
func Mount(opts Options) (*FS, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, errors.New("/dev/fuse is missing")
	}
	backing, err := realDir(opts.Backing)
	if err != nil {
		return nil, fmt.Errorf("backing directory: %w", err)
	}
	// Asked first: a dead mount cannot be stat'ed.
	if m, err := isMount(realPath(opts.Mount)); err != nil || m {
		return nil, errors.Join(err, fmt.Errorf("mount point %s is a mount already", opts.Mount))
	}
	mount, err := realDir(opts.Mount)
	if err != nil {
		return nil, fmt.Errorf("mount point: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	ent, err := newEntries(filepath.Join(backing, stashName))
	if err != nil {
		return nil, fmt.Errorf("stash: %w", err)
	}
	d := &FS{backing: backing, mount: mount, rootDev: st.Dev, files: map[uint64]*file{}, entries: ent, gate: newGate()}
	root := &node{disk: d}
	d.root = &root.Inode
	// Short caches: Drop invalidates what it changed, and nothing else changes the backing directory.
	timeout := time.Second
	d.server, err = fs.Mount(mount, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			// Servers under test run as users of their own, and the kernel checks their permissions.
			AllowOther:  true,
			Options:     []string{"default_permissions"},
			FsName:      FSType,
			Name:        FSType,
			DirectMount: true,
			Debug:       opts.Debug,
		},
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
	})
	if err != nil {
		ent.close()
		return nil, fmt.Errorf("mount %s: %w", mount, err)
	}
	return d, nil
}

func realDir(path string) (string, error) {
	if path == "" {
		return "", errors.New("not given")
	}
	p, err := filepath.Abs(path)
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return "", errors.Join(err, fmt.Errorf("%s is not a directory", p))
	}
	return p, nil
}

// Drop discards every pending change, as a power loss would: the data written since
// each file's last sync, pending truncates, and the directory changes since each
// directory's last sync, latest first. Waiting syncs fail with EIO. The kernel's caches
// of what changed are invalidated before Drop returns, so that reads through the mount
// see only the durable state.
func (d *FS) Drop() Lost {
	// First, because the kernel holds a waiting sync's file locked, and invalidating
	// that file's caches below waits for the lock.
	d.gate.dropped()
	d.mu.Lock()
	lost := Lost{Files: []LostFile{}}
	var content []*fs.Inode
	d.filesMu.Lock()
	for key, f := range d.files {
		f.mu.Lock()
		if f.pending != nil {
			lost.Files = append(lost.Files, LostFile{Path: f.path, Bytes: f.pending.dirty})
			d.dirty.Add(-f.pending.dirty)
			f.pending, f.mtime = nil, time.Time{}
			content = append(content, f.inode)
		}
		f.mu.Unlock()
		if f.opens == 0 {
			delete(d.files, key)
		}
	}
	d.filesMu.Unlock()
	d.entries.mu.Lock()
	lost.Entries = d.entries.undo()
	d.entries.mu.Unlock()
	var names []childName
	d.forgetStale(d.root, d.backing, &names)
	d.mu.Unlock()

	// Unlocked: the kernel may need to finish requests before it takes an invalidation.
	for _, in := range content {
		in.NotifyContent(0, 0)
	}
	for _, n := range names {
		n.dir.NotifyEntry(n.name)
	}
	slices.SortFunc(lost.Files, func(a, b LostFile) int { return strings.Compare(a.Path, b.Path) })
	return lost
}

// A childName is a name in a directory of go-fuse's tree.
type childName struct {
	dir  *fs.Inode
	name string
}

// forgetStale removes from go-fuse's tree under dir (at path in the backing directory)
// every name the backing directory no longer gives to the same inode, and lists them
// for the kernel to forget too.
func (d *FS) forgetStale(dir *fs.Inode, path string, stale *[]childName) {
	for name, child := range dir.Children() {
		p := filepath.Join(path, name)
		st, gen, err := lstat(p)
		if err != nil || d.stableAttr(&st, gen) != child.StableAttr() {
			dir.RmChild(name)
			*stale = append(*stale, childName{dir, name})
			continue
		}
		if child.IsDir() {
			d.forgetStale(child, p, stale)
		}
	}
}

// SetSyncDelay makes every sync wait d before it is answered, syncs waiting now
// included: one that has waited d already is answered at once. 0 heals.
func (d *FS) SetSyncDelay(delay time.Duration) { d.gate.set(delay) }

// Stats reads the counters.
func (d *FS) Stats() Stats {
	return Stats{
		Syncs:          d.syncs.Load(),
		SyncDelay:      d.gate.delayNow(),
		SyncsWaiting:   d.gate.held(),
		BytesWritten:   d.written.Load(),
		BytesSynced:    d.synced.Load(),
		DirtyBytes:     d.dirty.Load(),
		PendingEntries: d.entries.pending(),
	}
}

// HoldOpens makes every open of a file wait until ReleaseOpens, while everything else
// answers: a server crashed in place then reads nothing of the disk again before a Drop.
func (d *FS) HoldOpens() { d.opens.close() }

// ReleaseOpens lets the opens HoldOpens held go on.
func (d *FS) ReleaseOpens() { d.opens.open() }

// Sync makes every pending change durable, as a sync of the whole filesystem does: the
// data written, the pending truncates and the directory changes.
func (d *FS) Sync() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeBack()
	d.entries.mu.Lock()
	defer d.entries.mu.Unlock()
	d.entries.settle(func(*change) bool { return true })
}

// String says what was lost in words: "31 bytes of appendonlydir/a.aof; created x",
// or "nothing" when nothing was.
func (l Lost) String() string {
	var said []string
	for _, f := range l.Files {
		said = append(said, fmt.Sprintf("%d unsynced bytes of %s", f.Bytes, f.Path))
	}
	said = append(said, l.Entries...)
	if len(said) == 0 {
		return "nothing"
	}
	return strings.Join(said, "; ")
}

// Unmount wakes the waiting syncs, unmounts, and then writes back the pending data and
// makes the pending directory changes durable, as a clean shutdown does. When a process
// still has a file open there, the mount is detached lazily: it is gone from the tree
// at once, and the kernel ends it when the last file is closed; what is done there
// after Unmount returns is not written back.
func (d *FS) Unmount() error {
	d.unmountOnce.Do(func() {
		d.gate.close()
		d.opens.open()
		if err := d.server.Unmount(); err != nil {
			if err := unix.Unmount(d.mount, unix.MNT_DETACH); err != nil {
				d.unmountErr = fmt.Errorf("unmount %s: %w", d.mount, err)
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.writeBack()
		d.entries.close()
	})
	return d.unmountErr
}

// writeBack writes every file's pending data to the backing directory.
func (d *FS) writeBack() {
	d.filesMu.Lock()
	defer d.filesMu.Unlock()
	for _, f := range d.files {
		f.mu.Lock()
		d.writeBackFile(f)
		f.mu.Unlock()
	}
}

// writeBackFile writes f's pending data to its backing file, if it still has a name.
func (d *FS) writeBackFile(f *file) {
	if f.pending == nil {
		return
	}
	path, ok := d.pathOf(f.inode)
	if !ok {
		return // removed: nothing durable names it
	}
	out, err := os.OpenFile(filepath.Join(d.backing, path), os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer out.Close()
	if f.pending.flush(out) == nil && out.Sync() == nil {
		d.synced.Add(f.pending.dirty)
		d.dirty.Add(-f.pending.dirty)
		f.pending = nil
	}
}

// pathOf gives the path of in relative to the root, if it has one.
func (d *FS) pathOf(in *fs.Inode) (string, bool) {
	var names []string
	for in != d.root {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		in = parent
	}
	slices.Reverse(names)
	return filepath.Join(names...), true
}

// stableAttr identifies a backing inode to go-fuse and keys the files and directories
// kept here. The device is mixed in, as go-fuse's loopback does, so that a filesystem
// mounted inside the backing directory cannot collide with it.
func (d *FS) stableAttr(st *syscall.Stat_t, gen uint64) fs.StableAttr {
	swapped := func(dev uint64) uint64 { return dev<<32 | dev>>32 }
	return fs.StableAttr{
		Mode: st.Mode & syscall.S_IFMT,
		Ino:  swapped(st.Dev) ^ swapped(d.rootDev) ^ st.Ino,
		Gen:  gen,
	}
}

// lstat stats path without following a last symlink, and gives its inode's generation:
// its birth time, which tells a reused inode number from the file that had it before.
func lstat(path string) (syscall.Stat_t, uint64, error) {
	return statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW)
}

func fstat(fd int) (syscall.Stat_t, uint64, error) {
	return statx(fd, "", unix.AT_EMPTY_PATH)
}

func statx(dirfd int, path string, flags int) (syscall.Stat_t, uint64, error) {
	var x unix.Statx_t
	if err := unix.Statx(dirfd, path, flags, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return syscall.Stat_t{}, 0, err
	}
	ts := func(t unix.StatxTimestamp) syscall.Timespec { return syscall.Timespec{Sec: t.Sec, Nsec: int64(t.Nsec)} }
	st := syscall.Stat_t{
		Dev:     unix.Mkdev(x.Dev_major, x.Dev_minor),
		Ino:     x.Ino,
		Nlink:   uint64(x.Nlink),
		Mode:    uint32(x.Mode),
		Uid:     x.Uid,
		Gid:     x.Gid,
		Rdev:    unix.Mkdev(x.Rdev_major, x.Rdev_minor),
		Size:    int64(x.Size),
		Blksize: int64(x.Blksize),
		Blocks:  int64(x.Blocks),
		Atim:    ts(x.Atime),
		Mtim:    ts(x.Mtime),
		Ctim:    ts(x.Ctime),
	}
	gen := uint64(1)
	if x.Mask&unix.STATX_BTIME != 0 {
		gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return st, gen, nil
}
