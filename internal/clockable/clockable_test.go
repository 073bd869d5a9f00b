package clockable

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// elf64 is a minimal x86-64 executable header, with a PT_INTERP naming interp when it is
// not "" (a dynamically linked program) and no program header at all otherwise (static).
func elf64(interp string) []byte {
	b := make([]byte, 64)
	copy(b, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint16(b[52:], 64) // e_ehsize
	le.PutUint16(b[54:], 56) // e_phentsize
	le.PutUint16(b[58:], 64) // e_shentsize
	if interp == "" {
		return b
	}
	le.PutUint64(b[32:], 64) // e_phoff
	le.PutUint16(b[56:], 1)  // e_phnum
	ph := make([]byte, 56)
	le.PutUint32(ph[0:], 3) // PT_INTERP
	le.PutUint32(ph[4:], 4)
	le.PutUint64(ph[8:], 120)                    // p_offset
	le.PutUint64(ph[32:], uint64(len(interp)+1)) // p_filesz
	le.PutUint64(ph[40:], uint64(len(interp)+1)) // p_memsz
	le.PutUint64(ph[48:], 1)
	return append(append(b, ph...), append([]byte(interp), 0)...)
}

func TestWhyLibfaketimeCannotMoveAClock(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	goProgram, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		program []byte
		want    string
	}{
		{"a glibc program", elf64("/lib64/ld-linux-x86-64.so.2"), ""},
		{"a static binary", elf64(""), "/bin/lockd is a static binary"},
		{"a musl program", elf64("/lib/ld-musl-x86_64.so.1"), "/bin/lockd runs on musl libc"},
		{"a Go program", goProgram, "/bin/lockd is a Go program"},
		{"not a program", []byte("hello"), "is not an executable"},
		{"a script", []byte("#!/bin/sh -eu\necho\n"), ""},
	}
	for _, tt := range tests {
		got := Why("/bin/lockd", tt.program)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := Interpreter([]byte("#!/bin/sh -eu\necho\n")); got != "/bin/sh" {
		t.Errorf("a script's interpreter: %q", got)
	}
}

// A program of this host's needs no symbol version its own libc lacks.
func TestMissingVersionsOfThisHostsLibc(t *testing.T) {
	libc, err1 := os.ReadFile("/lib/x86_64-linux-gnu/libc.so.6")
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	program, err2 := os.ReadFile(sh)
	if err1 != nil || err2 != nil {
		t.Skip("no x86-64 glibc here")
	}
	missing, err := MissingVersions(program, libc)
	if err != nil || len(missing) > 0 {
		t.Fatalf("missing %v, %v", missing, err)
	}
}
