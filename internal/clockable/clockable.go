// Package clockable says whether libfaketime, preloaded into a program, can move the wall
// clock it reads: only a dynamically linked program of glibc's, not written in Go, reads
// the time through the libc functions libfaketime replaces. It reads the program's ELF
// header and nothing else; it runs nothing.
package clockable

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"strings"
)

// Why says why libfaketime cannot move program's clock, program being the bytes of an
// executable called name; "" when it can. A script (#!) is judged by its interpreter,
// which the caller must then look at: Why returns "" for it and Interpreter names it.
func Why(name string, program []byte) string {
	if bytes.HasPrefix(program, []byte("#!")) {
		return ""
	}
	f, err := elf.NewFile(bytes.NewReader(program))
	if err != nil {
		return fmt.Sprintf("%s is not an executable libfaketime can be preloaded into (%v)", name, err)
	}
	defer f.Close()
	if _, err := buildinfo.Read(bytes.NewReader(program)); err == nil {
		return fmt.Sprintf("%s is a Go program, which reads the time without libc, where libfaketime moves it", name)
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	switch {
	case interp == "":
		return fmt.Sprintf("%s is a static binary: no library can be preloaded into it", name)
	case strings.Contains(interp, "musl"):
		return fmt.Sprintf("%s runs on musl libc (%s), and the harness's libfaketime is built for glibc", name, interp)
	}
	return ""
}

// Interpreter is the program a script (#!) names, "" for anything else.
func Interpreter(program []byte) string {
	line, ok := bytes.CutPrefix(program, []byte("#!"))
	if !ok {
		return ""
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

// MissingVersions are the symbol versions (GLIBC_2.34...) that lib needs of libc and
// libc, the image's libc.so.6, does not define: with any, lib cannot be preloaded there.
func MissingVersions(lib, libc []byte) ([]string, error) {
	l, err := elf.NewFile(bytes.NewReader(lib))
	if err != nil {
		return nil, fmt.Errorf("libfaketime: %w", err)
	}
	defer l.Close()
	c, err := elf.NewFile(bytes.NewReader(libc))
	if err != nil {
		return nil, fmt.Errorf("libc.so.6: %w", err)
	}
	defer c.Close()
	defined := map[string]bool{}
	defs, err := c.DynamicVersions()
	if err != nil {
		return nil, fmt.Errorf("libc.so.6: %w", err)
	}
	for _, d := range defs {
		defined[d.Name] = true
	}
	needs, err := l.DynamicVersionNeeds()
	if err != nil {
		return nil, fmt.Errorf("libfaketime: %w", err)
	}
	var missing []string
	for _, n := range needs {
		if n.Name != "libc.so.6" {
			continue
		}
		for _, v := range n.Needs {
			if !defined[v.Dep] {
				missing = append(missing, v.Dep)
			}
		}
	}
	return missing, nil
}
