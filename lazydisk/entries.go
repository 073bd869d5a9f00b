package lazydisk

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// entries is the undo log of the directory changes not yet made durable. A change is
// made in the backing directory at once; what it took away (an unlinked file, a
// directory removed, the file a rename replaced) is moved into the stash, a directory
// outside the served tree on the same filesystem, so that Drop can put it back. The
// callers hold mu around a change and its record, so the log is in the backing
// directory's order.
type entries struct {
	mu      sync.Mutex
	stash   string // the stash's path
	stashFd int
	named   int // stash names given so far
	log     []*change
	dirs    map[uint64]*dirRef // by key, the directories the log refers to
}

// A dirRef is a directory as the log holds it: open, so an undo finds it wherever it
// was moved since.
type dirRef struct {
	fd   int
	key  uint64 // the key of its inode (FS.stableAttr)
	refs int    // changes that hold it
}

// where names a directory by its backing path now and its key.
type where struct {
	path string
	key  uint64
}

type changeKind int

const (
	created changeKind = iota
	removed
	renamed
	exchanged
)

// A change is one directory change not yet durable.
type change struct {
	kind    changeKind
	dir     *dirRef // where name is now: its sync makes the change durable
	name    string
	from    *dirRef // renamed, exchanged: where the entry came from
	oldName string
	stashed string // removed, renamed: the stash name of what the change took away
	inode   uint64 // created: the key of the inode named, whose own sync makes it durable
	what    string // said in Lost: "created a/b"
}

func newEntries(stash string) (*entries, error) {
	// Whatever a killed daemon left in the stash stays taken away.
	if err := os.RemoveAll(stash); err != nil {
		return nil, err
	}
	if err := os.Mkdir(stash, 0o700); err != nil {
		return nil, err
	}
	fd, err := unix.Open(stash, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &entries{stash: stash, stashFd: fd, dirs: map[uint64]*dirRef{}}, nil
}

// created records that the entry name in dir was made, naming the inode of key inode.
func (e *entries) created(dir where, name string, inode uint64, what string) error {
	r, err := e.ref(dir)
	if err != nil {
		return err
	}
	e.log = append(e.log, &change{kind: created, dir: r, name: name, inode: inode, what: what})
	return nil
}

// remove unlinks name from dir (rmdir when isDir) by moving it into the stash, and
// records it. It returns what name was before.
func (e *entries) remove(dir where, name string, isDir bool, what string) (syscall.Stat_t, error) {
	p := filepath.Join(dir.path, name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return st, err
	}
	switch {
	case isDir && st.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		return st, syscall.ENOTDIR
	case isDir:
		if err := emptyDir(p); err != nil {
			return st, err
		}
	case st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		return st, syscall.EISDIR
	}
	r, err := e.ref(dir)
	if err != nil {
		return st, err
	}
	stashed := e.stashName()
	if err := unix.Renameat(unix.AT_FDCWD, p, e.stashFd, stashed); err != nil {
		e.release(r)
		return st, err
	}
	e.log = append(e.log, &change{kind: removed, dir: r, name: name, stashed: stashed, what: what})
	return st, nil
}

// rename renames oldName in from to newName in to with the flags of renameat2, and
// records it. An entry it replaces is moved into the stash first and returned.
func (e *entries) rename(from where, oldName string, to where, newName string, flags uint32, what string) (*syscall.Stat_t, error) {
	src, dst := filepath.Join(from.path, oldName), filepath.Join(to.path, newName)
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 {
		return nil, syscall.EINVAL
	}
	var s, v syscall.Stat_t
	if err := syscall.Lstat(src, &s); err != nil {
		return nil, err
	}
	kind := renamed
	var victim *syscall.Stat_t
	switch err := syscall.Lstat(dst, &v); {
	case flags&unix.RENAME_EXCHANGE != 0:
		kind = exchanged
	case errors.Is(err, syscall.ENOENT):
	case err != nil:
		return nil, err
	case flags&unix.RENAME_NOREPLACE != 0:
		return nil, syscall.EEXIST
	case s.Dev == v.Dev && s.Ino == v.Ino:
		return nil, nil // two names of one file: rename does nothing
	default:
		if err := replaceable(&s, &v, dst); err != nil {
			return nil, err
		}
		victim = &v
	}
	rto, err := e.ref(to)
	if err != nil {
		return nil, err
	}
	rfrom, err := e.ref(from)
	if err != nil {
		e.release(rto)
		return nil, err
	}
	c := &change{kind: kind, dir: rto, name: newName, from: rfrom, oldName: oldName, what: what}
	if victim != nil {
		c.stashed = e.stashName()
		if err := unix.Renameat(unix.AT_FDCWD, dst, e.stashFd, c.stashed); err != nil {
			e.release(rto)
			e.release(rfrom)
			return nil, err
		}
	}
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, uint(flags)); err != nil {
		if victim != nil {
			_ = unix.Renameat(e.stashFd, c.stashed, unix.AT_FDCWD, dst)
		}
		e.release(rto)
		e.release(rfrom)
		return nil, err
	}
	e.log = append(e.log, c)
	return victim, nil
}

// replaceable says why a rename of s must not replace v (at dst), as rename(2) would.
func replaceable(s, v *syscall.Stat_t, dst string) error {
	sDir, vDir := s.Mode&syscall.S_IFMT == syscall.S_IFDIR, v.Mode&syscall.S_IFMT == syscall.S_IFDIR
	switch {
	case vDir && !sDir:
		return syscall.EISDIR
	case sDir && !vDir:
		return syscall.ENOTDIR
	case vDir:
		return emptyDir(dst)
	}
	return nil
}

func emptyDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	switch names, err := f.Readdirnames(1); {
	case len(names) > 0:
		return syscall.ENOTEMPTY
	case errors.Is(err, io.EOF):
		return nil
	default:
		return err
	}
}

// commit makes every change of names so far durable: any sync does, as on ext4, where
// one fsync commits the journal and with it every earlier change of names, so a power
// loss undoes the latest changes and never an earlier one alone.
func (e *entries) commit() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle(func(*change) bool { return true })
}

func (e *entries) settle(durable func(*change) bool) {
	kept := e.log[:0]
	for _, c := range e.log {
		if !durable(c) {
			kept = append(kept, c)
			continue
		}
		if c.stashed != "" {
			_ = os.RemoveAll(filepath.Join(e.stash, c.stashed))
		}
		e.forget(c)
	}
	clear(e.log[len(kept):])
	e.log = kept
}

// undo reverts every change, the latest first, and says what was undone in the order
// the changes were made. A change that cannot be reverted (one made durable since is in
// its way) is said with why.
func (e *entries) undo() []string {
	said := make([]string, 0, len(e.log))
	for _, c := range slices.Backward(e.log) {
		what := c.what
		if err := e.revert(c); err != nil {
			what += " (not undone: " + err.Error() + ")"
		}
		said = append(said, what)
		e.forget(c)
	}
	slices.Reverse(said)
	e.log = nil
	e.emptyStash()
	return said
}

func (e *entries) revert(c *change) error {
	switch c.kind {
	case created:
		return e.discard(c.dir.fd, c.name)
	case removed:
		return unix.Renameat2(e.stashFd, c.stashed, c.dir.fd, c.name, unix.RENAME_NOREPLACE)
	case renamed:
		if err := unix.Renameat2(c.dir.fd, c.name, c.from.fd, c.oldName, unix.RENAME_NOREPLACE); err != nil {
			return err
		}
		if c.stashed != "" {
			return unix.Renameat2(e.stashFd, c.stashed, c.dir.fd, c.name, unix.RENAME_NOREPLACE)
		}
		return nil
	default:
		return unix.Renameat2(c.from.fd, c.oldName, c.dir.fd, c.name, unix.RENAME_EXCHANGE)
	}
}

// discard removes name from the directory dirfd, a whole tree if it is a directory
// (what it holds was never reachable on disk): moved into the stash, so it goes at once.
func (e *entries) discard(dirfd int, name string) error {
	stashed := e.stashName()
	if err := unix.Renameat(dirfd, name, e.stashFd, stashed); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(e.stash, stashed))
}

func (e *entries) emptyStash() {
	names, _ := os.ReadDir(e.stash)
	for _, n := range names {
		_ = os.RemoveAll(filepath.Join(e.stash, n.Name()))
	}
}

// pending counts the changes not yet durable.
func (e *entries) pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.log)
}

// ref holds the directory named by w for a change.
func (e *entries) ref(w where) (*dirRef, error) {
	if r := e.dirs[w.key]; r != nil && alive(r.fd) {
		r.refs++
		return r, nil
	}
	fd, err := unix.Open(w.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	r := &dirRef{fd: fd, key: w.key, refs: 1}
	e.dirs[w.key] = r
	return r, nil
}

// alive says whether the directory open as fd is still linked: a removed one's inode
// number may name another directory by now.
func alive(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Nlink > 0
}

func (e *entries) forget(c *change) {
	e.release(c.dir)
	if c.from != nil {
		e.release(c.from)
	}
}

func (e *entries) release(r *dirRef) {
	if r.refs--; r.refs > 0 {
		return
	}
	syscall.Close(r.fd)
	if e.dirs[r.key] == r {
		delete(e.dirs, r.key)
	}
}

func (e *entries) stashName() string {
	e.named++
	return strconv.Itoa(e.named)
}

// close makes every change durable and lets the stash go.
func (e *entries) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle(func(*change) bool { return true })
	syscall.Close(e.stashFd)
	// A request still served after a lazy unmount must not reach whatever has the number now.
	e.stashFd = -1
	_ = os.RemoveAll(e.stash)
}
