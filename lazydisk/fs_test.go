package lazydisk

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mounted mounts a lazy disk over a new backing directory for one test, or skips the
// test where this machine cannot mount one.
func mounted(t testing.TB) (d *FS, backing, mnt string) {
	t.Helper()
	_, backing, mnt = diskDirs(t)
	d, err := Mount(Options{Backing: backing, Mount: mnt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return d, backing, mnt
}

func writeFile(t testing.TB, path, content string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// diskDirs makes a directory for one test's disk, with a backing directory and a mount
// point in it, or skips the test where this machine cannot mount a lazy disk.
func diskDirs(t testing.TB) (dir, backing, mnt string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a lazy disk needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this machine")
	}
	dir = t.TempDir()
	backing, mnt = filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, p := range []string{backing, mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, backing, mnt
}

// written opens the file at path and writes content to it without a sync; the caller
// closes it.
func written(t testing.TB, path, content string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return f
}

// syncedFile makes the file f in the mount's root with content, durable, entry and all;
// its path.
func syncedFile(t testing.TB, mnt, content string) string {
	t.Helper()
	p := filepath.Join(mnt, "f")
	writeFile(t, p, content, true)
	syncDir(t, mnt)
	return p
}

// appendFile appends content to the file at path without a sync.
func appendFile(t testing.TB, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// syncDir fsyncs the directory at path.
func syncDir(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// content reads path, "<missing>" when there is no such file.
func content(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantContent(t testing.TB, path, want string) {
	t.Helper()
	if got := content(t, path); got != want {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
}

func TestUnsyncedWriteIsDropped(t *testing.T) {
	d, backing, mnt := mounted(t)
	p := syncedFile(t, mnt, "durable")

	appendFile(t, p, " and more")
	wantContent(t, p, "durable and more")
	wantContent(t, filepath.Join(backing, "f"), "durable")
	if got := d.Stats().DirtyBytes; got != 9 {
		t.Errorf("dirty bytes %d, want 9", got)
	}

	lost := d.Drop()
	if want := []LostFile{{Path: "f", Bytes: 9}}; !slices.Equal(lost.Files, want) {
		t.Errorf("lost files %v, want %v", lost.Files, want)
	}
	if len(lost.Entries) != 0 {
		t.Errorf("lost entries %q, want none", lost.Entries)
	}
	wantContent(t, p, "durable")
	if fi, err := os.Stat(p); err != nil || fi.Size() != 7 {
		t.Errorf("stat after drop: %v, %v; want size 7", fi, err)
	}
	if got := d.Stats().DirtyBytes; got != 0 {
		t.Errorf("dirty bytes %d after drop, want 0", got)
	}
}

func TestSyncedWriteSurvives(t *testing.T) {
	for _, sync := range []struct {
		name string
		do   func(*os.File) error
	}{
		{"fsync", (*os.File).Sync},
		{"fdatasync", func(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }},
	} {
		t.Run(sync.name, func(t *testing.T) {
			d, backing, mnt := mounted(t)
			p := syncedFile(t, mnt, "")
			f := written(t, p, "kept")
			defer f.Close()
			if err := sync.do(f); err != nil {
				t.Fatal(err)
			}
			wantContent(t, filepath.Join(backing, "f"), "kept")
			if lost := d.Drop(); len(lost.Files)+len(lost.Entries) != 0 {
				t.Errorf("lost %+v, want nothing", lost)
			}
			wantContent(t, p, "kept")
			if s := d.Stats(); s.Syncs < 2 || s.BytesSynced != 4 {
				t.Errorf("stats %+v, want at least 2 syncs and 4 bytes synced", s)
			}
		})
	}
}

func TestSyncOpenedWritesSurvive(t *testing.T) {
	for _, flag := range []struct {
		name string
		flag int
	}{{"O_SYNC", os.O_SYNC}, {"O_DSYNC", syscall.O_DSYNC}} {
		t.Run(flag.name, func(t *testing.T) {
			d, _, mnt := mounted(t)
			p := syncedFile(t, mnt, "")
			f, err := os.OpenFile(p, os.O_WRONLY|flag.flag, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("at once"); err != nil {
				t.Fatal(err)
			}
			d.Drop()
			wantContent(t, p, "at once")
		})
	}
}

// TestAppendOnlyLog is Redis's AOF with appendfsync every N: records appended, an
// fsync after every 10th; a drop loses only the records after the last fsync.
func TestAppendOnlyLog(t *testing.T) {
	d, _, mnt := mounted(t)
	p := filepath.Join(mnt, "appendonly.aof")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syncDir(t, mnt)
	var all, synced strings.Builder
	for i := range 37 {
		rec := strings.Repeat(string(rune('a'+i%26)), 10) + "\n"
		if _, err := f.WriteString(rec); err != nil {
			t.Fatal(err)
		}
		all.WriteString(rec)
		if (i+1)%10 == 0 {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			synced.Reset()
			synced.WriteString(all.String())
		}
	}
	wantContent(t, p, all.String())
	lost := d.Drop()
	if want := []LostFile{{Path: "appendonly.aof", Bytes: 7 * 11}}; !slices.Equal(lost.Files, want) {
		t.Errorf("lost %v, want %v", lost.Files, want)
	}
	wantContent(t, p, synced.String())
	// The log goes on after the drop from its durable end.
	if _, err := f.WriteString("after\n"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, synced.String()+"after\n")
}

// Any sync commits every change of names made before it, as an fsync commits ext4's
// journal; a drop undoes those made after the last sync, and no earlier one alone.
func TestAnySyncCommitsEveryEarlierChangeOfNames(t *testing.T) {
	d, backing, mnt := mounted(t)
	if err := os.Mkdir(filepath.Join(mnt, "early"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mnt, "synced"), "x", true) // commits "early" too
	if err := os.MkdirAll(filepath.Join(mnt, "dir", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mnt, "late"), "y", false)

	lost := d.Drop()
	wantContent(t, filepath.Join(mnt, "synced"), "x")
	if fi, err := os.Stat(filepath.Join(mnt, "early")); err != nil || !fi.IsDir() {
		t.Errorf("early after drop: %v, want it kept by the later sync", err)
	}
	for _, gone := range []string{"dir", "late"} {
		if _, err := os.Stat(filepath.Join(mnt, gone)); !os.IsNotExist(err) {
			t.Errorf("%s after drop: %v, want it gone", gone, err)
		}
		if _, err := os.Stat(filepath.Join(backing, gone)); !os.IsNotExist(err) {
			t.Errorf("backing %s after drop: %v, want it gone", gone, err)
		}
	}
	if want := []string{"created dir", "created dir/sub", "created late"}; !slices.Equal(lost.Entries, want) {
		t.Errorf("lost entries %q, want %q", lost.Entries, want)
	}
}

func TestNewFileWithoutSyncsVanishes(t *testing.T) {
	d, _, mnt := mounted(t)
	writeFile(t, filepath.Join(mnt, "f"), "gone", false)
	wantContent(t, filepath.Join(mnt, "f"), "gone")
	lost := d.Drop()
	wantContent(t, filepath.Join(mnt, "f"), "<missing>")
	if want := []string{"created f"}; !slices.Equal(lost.Entries, want) {
		t.Errorf("lost entries %q, want %q", lost.Entries, want)
	}
	if names := readDir(t, mnt); len(names) != 0 {
		t.Errorf("root lists %q after drop, want nothing", names)
	}
}

func readDir(t testing.TB, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRenameOverIsReverted(t *testing.T) {
	d, _, mnt := mounted(t)
	tmp, current := filepath.Join(mnt, "tmp"), filepath.Join(mnt, "current")
	writeFile(t, current, "old", true)
	writeFile(t, tmp, "new", true)
	syncDir(t, mnt)
	if err := os.Rename(tmp, current); err != nil {
		t.Fatal(err)
	}
	wantContent(t, current, "new")
	wantContent(t, tmp, "<missing>")
	lost := d.Drop()
	wantContent(t, current, "old")
	wantContent(t, tmp, "new")
	if want := []string{"renamed tmp to current"}; !slices.Equal(lost.Entries, want) {
		t.Errorf("lost entries %q, want %q", lost.Entries, want)
	}

	// With the directory's fsync the rename stays.
	if err := os.Rename(tmp, current); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	d.Drop()
	wantContent(t, current, "new")
	wantContent(t, tmp, "<missing>")
	if got := readDir(t, mnt); !slices.Equal(got, []string{"current"}) {
		t.Errorf("root lists %q, want [current]", got)
	}
}

func TestUnlinkIsReverted(t *testing.T) {
	d, _, mnt := mounted(t)
	p := syncedFile(t, mnt, "durable")
	// Pending data on the file dies with it.
	appendFile(t, p, " pending")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "<missing>")
	lost := d.Drop()
	wantContent(t, p, "durable")
	if len(lost.Files) != 0 || !slices.Equal(lost.Entries, []string{"removed f"}) {
		t.Errorf("lost %+v, want only the removal", lost)
	}

	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	d.Drop()
	wantContent(t, p, "<missing>")
}

func TestMkdirAndRmdir(t *testing.T) {
	d, _, mnt := mounted(t)
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// Nothing was synced since d was made: it goes, and what it held with it.
	writeFile(t, filepath.Join(dir, "f"), "inside", false)
	d.Drop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("d after drop: %v, want it gone", err)
	}

	// d's own fsync makes its entry durable, as any sync does.
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "f"), "inside", true)
	syncDir(t, dir)
	d.Drop()
	wantContent(t, filepath.Join(dir, "f"), "inside")
	if err := os.Remove(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)

	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	d.Drop()
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Fatalf("d after the rmdir was dropped: %v, %v; want a 0750 directory", fi, err)
	}
}

func TestTruncateIsPending(t *testing.T) {
	d, backing, mnt := mounted(t)
	p := filepath.Join(mnt, "f")
	writeFile(t, p, "0123456789", true)
	syncDir(t, mnt)

	if err := os.Truncate(p, 4); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "0123")
	wantContent(t, filepath.Join(backing, "f"), "0123456789")
	d.Drop()
	wantContent(t, p, "0123456789")
	writeFile(t, p, "", false) // open O_TRUNC
	wantContent(t, p, "")
	wantContent(t, filepath.Join(backing, "f"), "0123456789")
	d.Drop()
	wantContent(t, p, "0123456789")

	// A truncate, then writes past the cut, then fsync: the cut-off bytes read as zeros.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("xy"), 6); err != nil {
		t.Fatal(err)
	}
	want := "01\x00\x00\x00\x00xy"
	wantContent(t, p, want)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	wantContent(t, filepath.Join(backing, "f"), want)
	d.Drop()
	wantContent(t, p, want)
}

// TestReadAfterDropThroughTheMount: the kernel's caches of the mount, a page cache
// filled by a read and a file kept open across the drop, show the durable content.
func TestReadAfterDropThroughTheMount(t *testing.T) {
	d, _, mnt := mounted(t)
	p := filepath.Join(mnt, "f")
	writeFile(t, p, "durable!", true)
	syncDir(t, mnt)
	open, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.WriteAt([]byte("PENDING!"), 0); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "PENDING!")
	buf := make([]byte, 8)
	if _, err := open.ReadAt(buf, 0); err != nil || string(buf) != "PENDING!" {
		t.Fatalf("read %q, %v before the drop", buf, err)
	}

	d.Drop()
	wantContent(t, p, "durable!")
	if _, err := open.ReadAt(buf, 0); err != nil || string(buf) != "durable!" {
		t.Errorf("the file open across the drop reads %q, %v; want the durable content", buf, err)
	}
	// And it keeps working.
	if _, err := open.WriteAt([]byte("D"), 0); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "Durable!")
}

// TestOwnershipOfAnotherUser: a server running as its own user owns what it creates,
// with the modes it asked for, as PostgreSQL checks of its data directory.
func TestOwnershipOfAnotherUser(t *testing.T) {
	_, backing, mnt := mounted(t)
	// The user must reach the mount point.
	for p := mnt; p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(p, fi.Mode().Perm()|0o005); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chmod(mnt, 0o777); err != nil {
		t.Fatal(err)
	}
	// The shell changes into the mount itself: a child changing directory before its
	// exec, while this process (the FUSE server) waits in vfork, would wait forever.
	script := `cd "$0" && umask 022 && echo hi > f && mkdir -m 0700 data && chmod 0600 f && touch data/x`
	cmd := exec.Command("/bin/sh", "-c", script, mnt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 12345, Gid: 12346}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", script, err, out)
	}
	for _, c := range []struct {
		name string
		mode os.FileMode
	}{{"f", 0o600}, {"data", os.ModeDir | 0o700}, {"data/x", 0o644}} {
		for _, root := range []string{mnt, backing} {
			fi, err := os.Stat(filepath.Join(root, c.name))
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if st.Uid != 12345 || st.Gid != 12346 || fi.Mode() != c.mode {
				t.Errorf("%s: uid %d gid %d mode %v; want 12345 12346 %v", filepath.Join(root, c.name), st.Uid, st.Gid, fi.Mode(), c.mode)
			}
		}
	}
	// Another user is kept out of the 0700 directory by the kernel.
	cmd = exec.Command("/bin/ls", filepath.Join(mnt, "data"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 54321, Gid: 54321}}
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("Permission denied")) {
		t.Errorf("another user listed a 0700 directory: %v: %s", err, out)
	}
}

func TestChmodChownPassThrough(t *testing.T) {
	_, backing, mnt := mounted(t)
	dir := filepath.Join(mnt, "pgdata")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 999, 999); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(dir, when, when); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(backing, "pgdata")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != os.ModeDir|0o700 || st.Uid != 999 || st.Gid != 999 || !fi.ModTime().Equal(when) {
			t.Errorf("%s: mode %v uid %d gid %d mtime %v; want drwx------ 999 999 %v", p, fi.Mode(), st.Uid, st.Gid, fi.ModTime(), when)
		}
	}
}

func TestStashIsHidden(t *testing.T) {
	_, backing, mnt := mounted(t)
	if _, err := os.Stat(filepath.Join(backing, stashName)); err != nil {
		t.Fatalf("no stash in the backing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, stashName)); !os.IsNotExist(err) {
		t.Errorf("the stash shows through the mount: %v", err)
	}
	if err := os.Mkdir(filepath.Join(mnt, stashName), 0o755); err == nil {
		t.Error("made a directory by the stash's name")
	}
	if names := readDir(t, mnt); len(names) != 0 {
		t.Errorf("root lists %q, want nothing", names)
	}
}

func TestMain(m *testing.M) {
	switch os.Getenv("LAZYDISK_TEST_HELPER") {
	case "main":
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	case "mmap":
		os.Exit(serveMmapReads(os.Args[1]))
	}
	os.Exit(m.Run())
}

// serveMmapReads maps the file at path read-only, as bbolt maps its database, and
// answers each "offset length" line on stdin with the mapped bytes in hex. It runs in
// a process of its own: a page fault on the mount must not stop the FUSE server's
// goroutines, as a garbage collection in this process would while the fault waits.
func serveMmapReads(path string) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fi, err := f.Stat()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("mapped")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var off, n int
		if _, err := fmt.Sscan(sc.Text(), &off, &n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%x\n", mem[off:off+n])
	}
	return 0
}

// TestMmapReadsSeeWrites is bbolt's pattern: the file mapped read-only, written with
// pwrite and fdatasync; the mapping shows each write, synced or not, and after a drop
// the durable bytes.
func TestMmapReadsSeeWrites(t *testing.T) {
	d, _, mnt := mounted(t)
	p := filepath.Join(mnt, "db")
	writeFile(t, p, strings.Repeat("\x00", 8192), true)
	syncDir(t, mnt)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("synced"), 100); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], p)
	cmd.Env = append(os.Environ(), "LAZYDISK_TEST_HELPER=mmap")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	out := bufio.NewScanner(outPipe)
	if !out.Scan() || out.Text() != "mapped" {
		t.Fatalf("the mapping process said %q, %v", out.Text(), out.Err())
	}
	mapped := func(off, n int) string {
		t.Helper()
		fmt.Fprintf(in, "%d %d\n", off, n)
		if !out.Scan() {
			t.Fatalf("no answer from the mapping process: %v", out.Err())
		}
		b, err := hex.DecodeString(out.Text())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if got := mapped(100, 6); got != "synced" {
		t.Errorf("mapped %q, want the synced write", got)
	}
	if _, err := f.WriteAt([]byte("pending"), 102); err != nil {
		t.Fatal(err)
	}
	if got := mapped(100, 9); got != "sypending" {
		t.Errorf("mapped %q after a pwrite into a mapped page, want %q", got, "sypending")
	}
	if _, err := f.WriteAt([]byte("next page"), 5000); err != nil {
		t.Fatal(err)
	}
	if got := mapped(5000, 9); got != "next page" {
		t.Errorf("mapped %q in the second page, want the write", got)
	}
	d.Drop()
	if got := mapped(100, 9); got != "synced\x00\x00\x00" {
		t.Errorf("mapped %q after the drop, want the durable bytes", got)
	}
	if got := mapped(5000, 9); got != strings.Repeat("\x00", 9) {
		t.Errorf("mapped %q in the second page after the drop, want zeros", got)
	}
}

// waitFor waits until cond holds; the deadline only bounds a failing test.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// TestSlowSync: with the delay in force a sync waits, while reads, writes and stats
// on another file answer; a delay set after the sync began, the heal (0) or one the
// sync has waited out already, lets it through.
func TestSlowSync(t *testing.T) {
	for _, c := range []struct {
		name    string
		release time.Duration
		flags   int
		sync    func(*os.File) error
	}{
		{"fsync healed", 0, 0, (*os.File).Sync},
		{"fdatasync shortened", time.Nanosecond, 0, func(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }},
		{"O_SYNC write healed", 0, os.O_SYNC, func(f *os.File) error { _, err := f.WriteString("!"); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, backing, mnt := mounted(t)
			slowPath, other := filepath.Join(mnt, "slow"), filepath.Join(mnt, "other")
			writeFile(t, slowPath, "", true)
			writeFile(t, other, "other", true)
			syncDir(t, mnt)
			slow, err := os.OpenFile(slowPath, os.O_WRONLY|c.flags, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			d.SetSyncDelay(time.Hour)
			if c.flags == 0 {
				if _, err := slow.WriteString("!"); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- c.sync(slow) }()
			waitFor(t, "the sync to wait", func() bool { return d.Stats().SyncsWaiting == 1 })

			writeFile(t, other, "written meanwhile", false)
			wantContent(t, other, "written meanwhile")
			if _, err := os.Stat(slowPath); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Fatalf("the sync returned (%v) while the delay was in force", err)
			default:
			}

			d.SetSyncDelay(c.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			wantContent(t, filepath.Join(backing, "slow"), "!")
		})
	}
}

func TestDropFailsWaitingSync(t *testing.T) {
	d, _, mnt := mounted(t)
	p := syncedFile(t, mnt, "")
	f := written(t, p, "lost")
	defer f.Close()
	d.SetSyncDelay(time.Hour)
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	waitFor(t, "the sync to wait", func() bool { return d.Stats().SyncsWaiting == 1 })
	d.Drop()
	if err := <-done; !errors.Is(err, syscall.EIO) {
		t.Errorf("the sync waiting across the drop returned %v, want EIO", err)
	}
	wantContent(t, p, "")
}

func TestUnmountWakesWaitingSync(t *testing.T) {
	d, _, mnt := mounted(t)
	p := filepath.Join(mnt, "f")
	writeFile(t, p, "", true)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	d.SetSyncDelay(time.Hour)
	done := make(chan error, 1)
	go func() {
		err := f.Sync()
		f.Close()
		done <- err
	}()
	waitFor(t, "the sync to wait", func() bool { return d.Stats().SyncsWaiting == 1 })
	if err := d.Unmount(); err != nil {
		t.Fatal(err)
	}
	<-done
	if m, err := isMount(mnt); err != nil || m {
		t.Errorf("%s is still a mount (%v)", mnt, err)
	}
}

// tree maps every path under root (the stash aside) to its content, "/" for a directory.
func tree(t testing.TB, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case rel == stashName:
			return filepath.SkipDir
		case e.IsDir():
			files[rel] = "/"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestConcurrentRequestsAndDrops: workers append to logs, sync them, write files and
// rename them into place, in parallel, while drops come. Nothing deadlocks or races,
// and after a last drop nothing is pending and the mount shows the backing directory.
func TestConcurrentRequestsAndDrops(t *testing.T) {
	d, backing, mnt := mounted(t)
	const workers, rounds, drops = 4, 80, 4
	record := []byte(strings.Repeat("r", 63) + "\n")
	var progress atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		dir := filepath.Join(mnt, fmt.Sprintf("w%d", w))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "log"), "", true)
		syncDir(t, dir)
		log, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		wg.Go(func() {
			for i := range rounds {
				if _, err := log.Write(record); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					// A drop that comes while a sync waits fails it.
					if err := log.Sync(); err != nil && !errors.Is(err, syscall.EIO) {
						t.Error(err)
						return
					}
				}
				// A drop may take the new file away before the rename.
				tmp := filepath.Join(dir, fmt.Sprintf("tmp%d", i))
				if err := os.WriteFile(tmp, record, 0o644); err == nil {
					os.Rename(tmp, filepath.Join(dir, "current"))
				}
				if i%20 == 0 {
					if f, err := os.Open(dir); err == nil {
						f.Sync()
						f.Close()
					}
				}
				progress.Add(1)
			}
		})
	}
	syncDir(t, mnt)
	for k := range drops {
		waitFor(t, "the workers to go on", func() bool { return progress.Load() >= int64(k*workers*rounds/drops) })
		d.Drop()
	}
	wg.Wait()
	d.Drop()
	if s := d.Stats(); s.DirtyBytes != 0 || s.PendingEntries != 0 {
		t.Errorf("stats after the last drop %+v, want nothing pending", s)
	}
	if names := readDir(t, filepath.Join(backing, stashName)); len(names) != 0 {
		t.Errorf("the stash holds %q after the last drop", names)
	}
	if got, want := tree(t, mnt), tree(t, backing); !maps.Equal(got, want) {
		t.Errorf("the mount shows %v, the backing directory holds %v", got, want)
	}
}

func TestExchangeIsReverted(t *testing.T) {
	d, _, mnt := mounted(t)
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	writeFile(t, a, "A", true)
	writeFile(t, b, "B", true)
	syncDir(t, mnt)
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	wantContent(t, a, "B")
	lost := d.Drop()
	wantContent(t, a, "A")
	wantContent(t, b, "B")
	if want := []string{"exchanged a and b"}; !slices.Equal(lost.Entries, want) {
		t.Errorf("lost entries %q, want %q", lost.Entries, want)
	}
}

// TestUnmountWritesBack: an unmount is a clean shutdown, not a power loss.
func TestUnmountWritesBack(t *testing.T) {
	d, backing, mnt := mounted(t)
	writeFile(t, filepath.Join(mnt, "f"), "written", false)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, backing), map[string]string{".": "/", "f": "written", "d": "/"}; !maps.Equal(got, want) {
		t.Errorf("the backing directory holds %v after unmount, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(backing, stashName)); !os.IsNotExist(err) {
		t.Errorf("the stash is left after unmount (%v)", err)
	}
}

// While opens are held, a file cannot be opened, but it can be looked at; a Drop made
// meanwhile is what the held open then reads, as a server crashed in place and starting
// again reads only what the power loss left.
func TestHeldOpensReadWhatTheDropLeft(t *testing.T) {
	d, _, mnt := mounted(t)
	p := syncedFile(t, mnt, "durable")
	appendFile(t, p, " and lost")
	d.HoldOpens()
	read := make(chan string)
	go func() {
		b, err := os.ReadFile(p)
		if err != nil {
			read <- err.Error()
			return
		}
		read <- string(b)
	}()
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("stat while opens are held: %v", err)
	}
	select {
	case got := <-read:
		t.Fatalf("an open went through while held, and read %q", got)
	default:
	}
	d.Drop()
	d.ReleaseOpens()
	if got := <-read; got != "durable" {
		t.Errorf("the held open read %q, want what the drop left, %q", got, "durable")
	}
}
