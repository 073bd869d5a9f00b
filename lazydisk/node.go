package lazydisk

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A node is a file or directory of the served tree, found in the backing directory by
// its path in go-fuse's tree. Every request holds the filesystem's lock to read while
// it works; requests that change a directory also hold the undo log's.
type node struct {
	fs.Inode
	disk *FS
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
	_ fs.NodeGetxattrer = (*node)(nil)
)

// rel is the node's path relative to the root; a node no name leads to any more has
// none, and ENOENT.
func (n *node) rel() (string, syscall.Errno) {
	p, ok := n.disk.pathOf(&n.Inode)
	if !ok {
		return "", syscall.ENOENT
	}
	return p, 0
}

// path is the node's path in the backing directory.
func (n *node) path() (string, syscall.Errno) {
	rel, errno := n.rel()
	return filepath.Join(n.disk.backing, rel), errno
}

func (n *node) key() uint64 { return n.StableAttr().Ino }

// hides says whether name is the stash, which the served tree does not show.
func (n *node) hides(name string) bool { return n.IsRoot() && name == stashName }

// child gives the Inode of the backing inode st, and tells its attributes in out.
func (n *node) child(ctx context.Context, st *syscall.Stat_t, gen uint64, out *fuse.Attr) *fs.Inode {
	id := n.disk.stableAttr(st, gen)
	n.disk.overlay(id.Ino, st)
	out.FromStat(st)
	return n.NewInode(ctx, &node{disk: n.disk}, id)
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.hides(name) {
		return nil, syscall.ENOENT
	}
	n.disk.mu.RLock()
	defer n.disk.mu.RUnlock()
	dir, errno := n.path()
	if errno != 0 {
		return nil, errno
	}
	st, gen, err := lstat(filepath.Join(dir, name))
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return n.child(ctx, &st, gen, &out.Attr), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Getattr(ctx, out)
	}
	n.disk.mu.RLock()
	defer n.disk.mu.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		return errno
	}
	st, _, err := lstat(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	n.disk.overlay(n.key(), &st)
	out.FromStat(&st)
	return 0
}

// Setattr passes mode, owner and times through, and keeps a new size pending.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errno := n.setattr(f, in); errno != 0 {
		return errno
	}
	return n.Getattr(ctx, f, out)
}

func (n *node) setattr(f fs.FileHandle, in *fuse.SetAttrIn) syscall.Errno {
	d := n.disk
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		return errno
	}
	h, _ := f.(*handle)
	if m, ok := in.GetMode(); ok {
		err := syscall.Chmod(p, m)
		if h != nil {
			err = syscall.Fchmod(int(h.os.Fd()), m)
		}
		if err != nil {
			return fs.ToErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		suid, sgid := -1, -1
		if uok {
			suid = int(uid)
		}
		if gok {
			sgid = int(gid)
		}
		if err := syscall.Lchown(p, suid, sgid); err != nil {
			return fs.ToErrno(err)
		}
	}
	if size, ok := in.GetSize(); ok {
		st, _, err := lstat(p)
		if h != nil {
			st, _, err = fstat(int(h.os.Fd()))
		}
		if err != nil {
			return fs.ToErrno(err)
		}
		d.truncate(n.key(), &n.Inode, st.Size, int64(size))
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
			d.mtimeSet(n.key())
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fs.ToErrno(err)
		}
	}
	return 0
}

// mtimeSet stops the file of key showing its last pending write's time: it was set.
func (d *FS) mtimeSet(key uint64) {
	d.filesMu.Lock()
	f := d.files[key]
	d.filesMu.Unlock()
	if f != nil {
		f.mu.Lock()
		f.mtime = time.Time{}
		f.mu.Unlock()
	}
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.disk.opens.wait(ctx); errno != 0 {
		return nil, 0, errno
	}
	n.disk.mu.RLock()
	defer n.disk.mu.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		return nil, 0, errno
	}
	out, err := openBacking(p, flags)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	return n.disk.newHandle(&n.Inode, out, flags), 0, 0
}

// changing holds what a request that changes this directory holds, and gives the
// directory's backing path and the path of name in it relative to the root.
func (n *node) changing(name string) (dir where, rel string, unlock func(), errno syscall.Errno) {
	d := n.disk
	d.mu.RLock()
	d.entries.mu.Lock()
	unlock = func() {
		d.entries.mu.Unlock()
		d.mu.RUnlock()
	}
	r, errno := n.rel()
	if errno != 0 {
		unlock()
		return where{}, "", nil, errno
	}
	return where{filepath.Join(d.backing, r), n.key()}, filepath.Join(r, name), unlock, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.hides(name) {
		return nil, nil, 0, syscall.EPERM
	}
	if errno := n.disk.opens.wait(ctx); errno != 0 {
		return nil, nil, 0, errno
	}
	dir, rel, unlock, errno := n.changing(name)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer unlock()
	p := filepath.Join(dir.path, name)
	f, made, err := createBacking(p, flags, mode)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	st, gen, err := fstat(int(f.Fd()))
	if err == nil && made {
		err = own(ctx, p, dir.path, syscall.S_IFREG|mode)
	}
	if err == nil && made {
		err = n.disk.entries.created(dir, name, n.disk.stableAttr(&st, gen).Ino, "created "+rel)
	}
	if err != nil {
		f.Close()
		if made {
			syscall.Unlink(p)
		}
		return nil, nil, 0, fs.ToErrno(err)
	}
	ch := n.child(ctx, &st, gen, &out.Attr)
	return ch, n.disk.newHandle(ch, f, flags), 0, 0
}

// createBacking creates the file at path for Create, or opens it when it is there
// already and flags allow that (another creator won). It says whether it made the file.
func createBacking(path string, flags, mode uint32) (*os.File, bool, error) {
	rest := int(flags) &^ (syscall.O_ACCMODE | syscall.O_APPEND | syscall.O_TRUNC | syscall.O_SYNC | syscall.O_DSYNC | syscall.O_DIRECT)
	fd, err := syscall.Open(path, rest|syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, mode&0o7777)
	if errors.Is(err, syscall.EEXIST) && flags&syscall.O_EXCL == 0 {
		f, err := openBacking(path, flags)
		return f, false, err
	}
	if err != nil {
		return nil, false, err
	}
	return os.NewFile(uintptr(fd), path), true, nil
}

// own gives a new entry at path (in the directory parent) the caller's uid and gid, or
// the directory's gid when it is setgid, as a local filesystem would, and exactly the
// mode the caller asked for: the kernel applied the caller's umask to it already, and
// this process's umask must not cut it again.
func own(ctx context.Context, path, parent string, mode uint32) error {
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return nil
	}
	var pst syscall.Stat_t
	if err := syscall.Stat(parent, &pst); err != nil {
		return err
	}
	gid := int(caller.Gid)
	if pst.Mode&syscall.S_ISGID != 0 {
		gid = -1
		if mode&syscall.S_IFMT == syscall.S_IFDIR {
			mode |= syscall.S_ISGID
		}
	}
	if os.Geteuid() == 0 {
		if err := syscall.Lchown(path, int(caller.Uid), gid); err != nil {
			return err
		}
	}
	if mode&syscall.S_IFMT == syscall.S_IFLNK {
		return nil
	}
	return syscall.Chmod(path, mode&0o7777)
}

// made finishes a request that made the entry name at p: it owns it, records it as
// pending and gives its Inode; or removes it again and says why not.
func (n *node) made(ctx context.Context, dir where, name, rel string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := filepath.Join(dir.path, name)
	err := own(ctx, p, dir.path, mode)
	var st syscall.Stat_t
	var gen uint64
	if err == nil {
		st, gen, err = lstat(p)
	}
	if err == nil {
		err = n.disk.entries.created(dir, name, n.disk.stableAttr(&st, gen).Ino, "created "+rel)
	}
	if err != nil {
		if mode&syscall.S_IFMT == syscall.S_IFDIR {
			syscall.Rmdir(p)
		} else {
			syscall.Unlink(p)
		}
		return nil, fs.ToErrno(err)
	}
	return n.child(ctx, &st, gen, &out.Attr), 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, syscall.S_IFDIR|mode, out, func(path string) error { return syscall.Mkdir(path, mode&0o7777) })
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, mode, out, func(path string) error { return syscall.Mknod(path, mode, int(rdev)) })
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, syscall.S_IFLNK, out, func(path string) error { return syscall.Symlink(target, path) })
}

// make makes the entry name of the given mode in this directory by mk, which is given its
// backing path, and records it as a change of names.
func (n *node) make(ctx context.Context, name string, mode uint32, out *fuse.EntryOut, mk func(path string) error) (*fs.Inode, syscall.Errno) {
	if n.hides(name) {
		return nil, syscall.EPERM
	}
	dir, rel, unlock, errno := n.changing(name)
	if errno != 0 {
		return nil, errno
	}
	defer unlock()
	if err := mk(filepath.Join(dir.path, name)); err != nil {
		return nil, fs.ToErrno(err)
	}
	return n.made(ctx, dir, name, rel, mode, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	if n.hides(name) {
		return nil, syscall.EPERM
	}
	dir, rel, unlock, errno := n.changing(name)
	if errno != 0 {
		return nil, errno
	}
	defer unlock()
	tp, errno := t.path()
	if errno != 0 {
		return nil, errno
	}
	p := filepath.Join(dir.path, name)
	if err := syscall.Link(tp, p); err != nil {
		return nil, fs.ToErrno(err)
	}
	st, gen, err := lstat(p)
	if err == nil {
		err = n.disk.entries.created(dir, name, n.disk.stableAttr(&st, gen).Ino, "created "+rel)
	}
	if err != nil {
		syscall.Unlink(p)
		return nil, fs.ToErrno(err)
	}
	return n.child(ctx, &st, gen, &out.Attr), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	n.disk.mu.RLock()
	defer n.disk.mu.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		return nil, errno
	}
	target, err := os.Readlink(p)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return []byte(target), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, false)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, true)
}

func (n *node) remove(name string, isDir bool) syscall.Errno {
	if n.hides(name) {
		return syscall.ENOENT
	}
	dir, rel, unlock, errno := n.changing(name)
	if errno != 0 {
		return errno
	}
	defer unlock()
	st, err := n.disk.entries.remove(dir, name, isDir, "removed "+rel)
	if err != nil {
		return fs.ToErrno(err)
	}
	n.disk.removedFile(&st)
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if n.hides(name) || to.hides(newName) {
		return syscall.EPERM
	}
	from, oldRel, unlock, errno := n.changing(name)
	if errno != 0 {
		return errno
	}
	defer unlock()
	toRel, errno := to.rel()
	if errno != 0 {
		return errno
	}
	newRel := filepath.Join(toRel, newName)
	what := "renamed " + oldRel + " to " + newRel
	if flags&unix.RENAME_EXCHANGE != 0 {
		what = "exchanged " + oldRel + " and " + newRel
	}
	dest := where{filepath.Join(n.disk.backing, toRel), to.key()}
	victim, err := n.disk.entries.rename(from, name, dest, newName, flags, what)
	if err != nil {
		return fs.ToErrno(err)
	}
	if victim != nil {
		n.disk.removedFile(victim)
	}
	return 0
}

// Readdir lists the backing directory, without the stash at the root.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	n.disk.mu.RLock()
	defer n.disk.mu.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		return nil, errno
	}
	ds, errno := fs.NewLoopbackDirStream(p)
	if errno != 0 || !n.IsRoot() {
		return ds, errno
	}
	defer ds.Close()
	var list []fuse.DirEntry
	for ds.HasNext() {
		e, errno := ds.Next()
		if errno != 0 {
			return nil, errno
		}
		if e.Name != stashName {
			list = append(list, e)
		}
	}
	return fs.NewListDirStream(list), 0
}

// Fsync serves fsync and fdatasync of a file and fsync of a directory.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if n.IsDir() {
		return n.fsyncDir(ctx)
	}
	h, ok := f.(*handle)
	if !ok {
		return syscall.EBADF
	}
	const datasync = 1 // FUSE_FSYNC_FDATASYNC
	return h.fsync(ctx, flags&datasync != 0)
}

// fsyncDir makes the directory's pending changes durable, after the delay.
func (n *node) fsyncDir(ctx context.Context) syscall.Errno {
	d := n.disk
	if errno := d.gate.wait(ctx); errno != 0 {
		return errno
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, errno := n.path()
	if errno != 0 {
		return errno
	}
	fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fs.ToErrno(err)
	}
	err = syscall.Fsync(fd)
	syscall.Close(fd)
	if err != nil {
		return fs.ToErrno(err)
	}
	d.entries.commit()
	d.syncs.Add(1)
	return 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s syscall.Statfs_t
	if err := syscall.Statfs(n.disk.backing, &s); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatfsT(&s)
	return 0
}

// Getxattr says extended attributes are not served at all (ENOSYS), so that the kernel
// stops asking: otherwise it asks for security.capability before every write.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}
