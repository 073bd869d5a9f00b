package lazydisk

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A mountEntry is one line of /proc/self/mountinfo: where and what is mounted.
type mountEntry struct {
	point, fstype string
}

func mountTable() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var table []mountEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		table = append(table, mountEntry{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return table, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// realPath is path absolute with the symlinks of its directory resolved, as the mount
// table names it; its last element is not resolved, for a dead mount cannot be stat'ed.
func realPath(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return p
	}
	return filepath.Join(dir, filepath.Base(p))
}

func isMount(path string) (bool, error) {
	table, err := mountTable()
	for _, m := range table {
		if m.point == path {
			return true, err
		}
	}
	return false, err
}

// Mounts lists the mount points of every lazy disk mounted on this host, served or left
// behind by a killed daemon.
func Mounts() ([]string, error) {
	table, err := mountTable()
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	var ours []string
	for _, m := range table {
		if m.fstype == "fuse."+FSType {
			ours = append(ours, m.point)
		}
	}
	return ours, nil
}

// Unmount unmounts the lazy disk at mount, whether its daemon serves it or was killed,
// lazily: processes with files open there keep them until they close them. It does
// nothing when mount is not a mount, and refuses a mount that is not a lazy disk.
func Unmount(mount string) error {
	p := realPath(mount)
	table, err := mountTable()
	if err != nil {
		return fmt.Errorf("read mount table: %w", err)
	}
	fstype := ""
	for _, m := range table {
		if m.point == p {
			fstype = m.fstype
		}
	}
	switch fstype {
	case "":
		return nil
	case "fuse." + FSType:
	default:
		return fmt.Errorf("%s is a %s mount, not a lazy disk", p, fstype)
	}
	err = unix.Unmount(p, unix.MNT_DETACH)
	if errors.Is(err, unix.EPERM) {
		// Not root: fusermount unmounts what this user mounted.
		if out, ferr := exec.Command("fusermount3", "-u", "-z", p).CombinedOutput(); ferr != nil {
			return fmt.Errorf("unmount %s: %v: %s", p, ferr, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	return nil
}
