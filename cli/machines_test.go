package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/machines/machinestest"
)

// machines check names each machine that can serve, and refuses with one line and 254
// when one cannot, naming it and why.
func TestMachinesCheck(t *testing.T) {
	signer, key := machinestest.Key(t)
	good, noSudo := machinestest.Serve(t, signer.PublicKey()), machinestest.Serve(t, signer.PublicKey())
	noSudo.Sudo = false
	file := func(servers ...*machinestest.Server) string {
		var lines []string
		for _, s := range servers {
			lines = append(lines, s.Address())
		}
		path := filepath.Join(t.TempDir(), "machines.txt")
		if err := os.WriteFile(path, []byte("# the stand-ins\n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	code, stdout, stderr := lockbreaker(t, nil, "machines", "check", "--nodes-file", file(good), "--ssh-private-key", key)
	if code != 0 || stdout != good.Address()+": ready\n" {
		t.Errorf("a good machine: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = lockbreaker(t, nil, "machines", "check", "--nodes-file", file(good, noSudo), "--ssh-private-key", key)
	want := "lockbreaker: machine " + noSudo.Address() + ": cannot run commands as root (sudo): sudo: a password is required\n"
	if code != 254 || stderr != want {
		t.Errorf("a machine without sudo: exit %d, stderr %q; want 254 and %q", code, stderr, want)
	}
}
