package lazydisk

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A file is what is kept of one backing file (one inode, whatever its names) while it
// is open or has pending data.
type file struct {
	mu      sync.RWMutex
	pending *extents  // nil when all is durable
	mtime   time.Time // of the last pending write: the backing file's is older
	path    string    // where it was when first written since its last sync

	// Guarded by FS.filesMu.
	inode   *fs.Inode // to invalidate the kernel's cache of it
	opens   int
	removed bool // its last name was removed: once closed, nothing can reach it
}

// fileOf gives the file of key, made if there is none, known to the kernel as in.
// Callers hold d.mu to read and d.filesMu, until the file is held by what they do with
// it: a file neither open nor pending is let go.
func (d *FS) fileOf(key uint64, in *fs.Inode) *file {
	f := d.files[key]
	if f == nil {
		f = &file{}
		d.files[key] = f
	}
	f.inode = in
	return f
}

// startPending makes the pending state of f, known as in, if it has none, over a
// durable file of size. Callers hold f.mu.
func (d *FS) startPending(f *file, in *fs.Inode, size int64) {
	if f.pending == nil {
		f.pending = newExtents(size)
		f.path, _ = d.pathOf(in)
	}
}

// overlay shows in st what the file of key has pending: its size and the time of its
// last write.
func (d *FS) overlay(key uint64, st *syscall.Stat_t) {
	d.filesMu.Lock()
	f := d.files[key]
	d.filesMu.Unlock()
	if f == nil {
		return
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.pending == nil {
		return
	}
	st.Size = f.pending.size
	st.Blocks = max(st.Blocks, (st.Size+511)/512)
	if !f.mtime.IsZero() {
		st.Mtim = syscall.NsecToTimespec(f.mtime.UnixNano())
		st.Ctim = st.Mtim
	}
}

// truncate records a pending truncate of the file of key (known as in), whose durable
// size is durable. Callers hold d.mu to read.
func (d *FS) truncate(key uint64, in *fs.Inode, durable, size int64) {
	d.filesMu.Lock()
	defer d.filesMu.Unlock()
	f := d.fileOf(key, in)
	f.mu.Lock()
	defer f.mu.Unlock()
	d.startPending(f, in, durable)
	before := f.pending.dirty
	f.pending.truncate(size)
	f.mtime = time.Now()
	d.dirty.Add(f.pending.dirty - before)
}

// removedFile is told that a name of the file st was removed, so that the pending data
// of a file that nothing can reach any more is not kept, nor said lost.
func (d *FS) removedFile(st *syscall.Stat_t) {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink > 1 {
		return
	}
	key := d.stableAttr(st, 0).Ino
	d.filesMu.Lock()
	defer d.filesMu.Unlock()
	f := d.files[key]
	if f == nil {
		return
	}
	if f.opens > 0 {
		f.removed = true
		return
	}
	d.forgetFile(key, f)
}

// forgetFile lets the file of key go with its pending data. Callers hold d.filesMu.
func (d *FS) forgetFile(key uint64, f *file) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending != nil {
		d.dirty.Add(-f.pending.dirty)
		f.pending = nil
	}
	delete(d.files, key)
}

// A handle is a file open through the mount, over the backing file open read-write.
type handle struct {
	disk  *FS
	file  *file
	inode *fs.Inode
	key   uint64
	os    *os.File
	sync  bool // opened O_SYNC or O_DSYNC: each write is durable before it is answered
}

// openBacking opens the backing file at path for a handle opened with flags. The file
// is opened read-write whatever the flags (the kernel checked them), so that a sync
// through any handle can write the pending data.
func openBacking(path string, flags uint32) (*os.File, error) {
	// What lazydisk does itself (appends come with their offset from the kernel).
	const own = syscall.O_ACCMODE | syscall.O_APPEND | syscall.O_TRUNC | syscall.O_CREAT | syscall.O_EXCL |
		syscall.O_SYNC | syscall.O_DSYNC | syscall.O_DIRECT | fuse.FMODE_EXEC
	rest := int(flags) &^ own
	fd, err := syscall.Open(path, rest|syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		// A file that cannot be written here (a read-only filesystem) is read still.
		fd, err = syscall.Open(path, rest|int(flags)&syscall.O_ACCMODE|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func (d *FS) newHandle(in *fs.Inode, out *os.File, flags uint32) *handle {
	key := in.StableAttr().Ino
	d.filesMu.Lock()
	f := d.fileOf(key, in)
	f.opens++
	d.filesMu.Unlock()
	return &handle{disk: d, file: f, inode: in, key: key, os: out, sync: flags&syscall.O_DSYNC != 0}
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileGetattrer = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.disk.mu.RLock()
	defer h.disk.mu.RUnlock()
	h.file.mu.RLock()
	defer h.file.mu.RUnlock()
	var n int
	var err error
	if h.file.pending == nil {
		n, err = h.os.ReadAt(dest, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
	} else {
		n, err = h.file.pending.readAt(dest, off, h.os)
	}
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	d := h.disk
	d.mu.RLock()
	defer d.mu.RUnlock()
	f := h.file
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == nil {
		st, _, err := fstat(int(h.os.Fd()))
		if err != nil {
			return 0, fs.ToErrno(err)
		}
		d.startPending(f, h.inode, st.Size)
	}
	before := f.pending.dirty
	f.pending.write(off, data)
	f.mtime = time.Now()
	d.written.Add(int64(len(data)))
	d.dirty.Add(f.pending.dirty - before)
	if h.sync {
		// The kernel follows the write with a sync of its own, which waits the delay.
		if errno := h.flushLocked(true); errno != 0 {
			return 0, errno
		}
	}
	return uint32(len(data)), 0
}

// fsync makes the file's pending data durable, after the delay.
func (h *handle) fsync(ctx context.Context, datasync bool) syscall.Errno {
	d := h.disk
	if errno := d.gate.wait(ctx); errno != 0 {
		return errno
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	h.file.mu.Lock()
	errno := h.flushLocked(datasync)
	h.file.mu.Unlock()
	if errno != 0 {
		return errno
	}
	d.entries.commit()
	d.syncs.Add(1)
	return 0
}

// flushLocked writes the pending data to the backing file and syncs it. Callers hold
// the file's lock.
func (h *handle) flushLocked(datasync bool) syscall.Errno {
	d, f := h.disk, h.file
	if f.pending != nil {
		if err := f.pending.flush(h.os); err != nil {
			return fs.ToErrno(err)
		}
		d.synced.Add(f.pending.dirty)
		d.dirty.Add(-f.pending.dirty)
		f.pending, f.mtime = nil, time.Time{}
	}
	sync := unix.Fsync
	if datasync {
		sync = unix.Fdatasync
	}
	return fs.ToErrno(sync(int(h.os.Fd())))
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	h.disk.mu.RLock()
	defer h.disk.mu.RUnlock()
	st, _, err := fstat(int(h.os.Fd()))
	if err != nil {
		return fs.ToErrno(err)
	}
	h.disk.overlay(h.key, &st)
	out.FromStat(&st)
	return 0
}

// Allocate extends the file for fallocate's mode 0, as a pending truncate, and does
// nothing for FALLOC_FL_KEEP_SIZE: there is no space to reserve in memory. Other modes
// (punching holes...) are not served, and callers fall back to writing.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	switch mode {
	case unix.FALLOC_FL_KEEP_SIZE:
		return 0
	case 0:
	default:
		return syscall.EOPNOTSUPP
	}
	d := h.disk
	d.mu.RLock()
	defer d.mu.RUnlock()
	st, _, err := fstat(int(h.os.Fd()))
	if err != nil {
		return fs.ToErrno(err)
	}
	f, end := h.file, int64(off+size)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == nil && end <= st.Size || f.pending != nil && end <= f.pending.size {
		return 0
	}
	d.startPending(f, h.inode, st.Size)
	f.pending.truncate(end)
	f.mtime = time.Now()
	return 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	d := h.disk
	d.filesMu.Lock()
	f := h.file
	if f.opens--; f.opens == 0 {
		f.mu.RLock()
		clean := f.pending == nil
		f.mu.RUnlock()
		if clean || f.removed {
			d.forgetFile(h.key, f)
		}
	}
	d.filesMu.Unlock()
	return fs.ToErrno(h.os.Close())
}
