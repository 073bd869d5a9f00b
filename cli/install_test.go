package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker/internal/tier"
)

// lockbreaker as a team gets it, without the repository: make dist's archive unpacked in a
// directory of its own, and go install from a checkout. Each builds lockbreaker once, a link
// of the whole binary, so neither is in the fast tier; make dist's first build on a machine
// also compiles every package again (without cgo, paths trimmed), so it is in the long tier.
// No Docker.

// TestReleaseArchive unpacks make dist's archive where no repository is, checks both
// checksums, and runs the binary there as a user would: version names the version and
// commit git gives (stamped: the build records no VCS information here), and a run of the
// harness's own lock (the tutorial's step 0) tells its story and exits 1.
func TestReleaseArchive(t *testing.T) {
	// A static build compiles everything again (CGO_ENABLED=0): minutes on a fresh machine.
	tier.Long(t)
	root := repoRoot(t)
	version, commit := gitVersion(t, root)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make dist needs make")
	}
	dist := t.TempDir()
	mk := exec.Command("make", "--no-print-directory", "dist", "DIST="+dist, "ARCH="+runtime.GOARCH)
	mk.Dir = root
	mk.Env = append(buildEnv(), "GOFLAGS="+os.Getenv("GOFLAGS")+" -buildvcs=false") // the stamp alone must name them
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	name := "lockbreaker-" + version + "-linux-" + runtime.GOARCH + ".tar.gz"
	if got, _ := filepath.Glob(filepath.Join(dist, "*")); !slices.Equal(got, []string{filepath.Join(dist, name), filepath.Join(dist, name+".sha256")}) {
		t.Fatalf("make dist made %q, want %s and its .sha256", got, name)
	}
	checkSum(t, dist, name+".sha256", name)

	dir := t.TempDir() // not under the repository
	unpack(t, filepath.Join(dist, name), dir)
	checkSum(t, dir, "lockbreaker.sha256", "lockbreaker")
	for _, f := range []string{"README.md", "LICENSE"} {
		if a, b := readFile(t, filepath.Join(root, f)), readFile(t, filepath.Join(dir, f)); !bytes.Equal(a, b) {
			t.Errorf("the archive's %s is not the repository's", f)
		}
	}
	bin, err := elf.Open(filepath.Join(dir, "lockbreaker"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(bin.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		t.Error("the archive's lockbreaker is dynamically linked: it asks for a loader")
	}
	bin.Close()

	t.Run("version", func(t *testing.T) {
		code, stdout, stderr := inDir(t, dir, "./lockbreaker", "version")
		if want := "lockbreaker " + version + ", commit " + commit; code != 0 || !strings.HasPrefix(stdout, want) {
			t.Errorf("exit %d, %q (stderr %q): want exit 0 and %q first", code, stdout, stderr, want)
		}
	})
	t.Run("run", func(t *testing.T) {
		for seed := 1; ; seed++ {
			code, stdout, stderr := inDir(t, dir, "./lockbreaker", "run", "--system", "local-broken", "--nemesis", "none",
				"--time-limit", "5s", "--stop-at-first-violation", "--seed", fmt.Sprint(seed))
			if code == 2 && seed < dangerTries {
				continue // too little happened on a busy machine
			}
			if code != 1 || !strings.Contains(stdout, "\n  what happened first:\n") || !regexp.MustCompile(`\n  data-safety +INVALID `).MatchString(stdout) {
				t.Errorf("exit %d: want 1, data-safety INVALID and its story\n%s%s", code, stdout, stderr)
			}
			break
		}
		if _, err := os.Stat(filepath.Join(dir, "store", "latest", "history.jsonl")); err != nil {
			t.Errorf("the run's directory is not in the store where it ran: %v", err)
		}
	})
}

// TestGoInstall installs lockbreaker as the README's go install does for a user in a
// checkout, into a GOBIN of its own, with the VCS information recorded whatever GOFLAGS
// this machine has; its version, asked from elsewhere, names the commit. The checkout is a
// clone of the commit checked out here (Go finds no repository in a linked worktree,
// golang/go#58218). Built with make build's settings, it compiles only lockbreaker's own
// packages again (their paths differ): the dependencies come from make build's cache.
// (A static build with paths trimmed, as make dist's, compiles them all: minutes on a
// fresh machine, so TestReleaseArchive is in the long tier.)
func TestGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lockbreaker with go install: make test")
	}
	root := repoRoot(t)
	_, commit := gitVersion(t, root)
	checkout := t.TempDir()
	for _, args := range [][]string{
		{"clone", "--quiet", "--shared", "--no-checkout", root, checkout},
		{"-C", checkout, "checkout", "--quiet", "--detach", commit},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gobin := t.TempDir()
	install := exec.Command("go", "install", "-buildvcs=auto", "./cmd/lockbreaker")
	install.Dir = checkout
	install.Env = append(buildEnv(), "GOBIN="+gobin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	code, stdout, stderr := inDir(t, t.TempDir(), filepath.Join(gobin, "lockbreaker"), "version")
	if want := ", commit " + commit + ", "; code != 0 || !strings.HasPrefix(stdout, "lockbreaker v") || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, %q (stderr %q): want exit 0, lockbreaker vVERSION and %q", code, stdout, stderr, want)
	}
}

// gitVersion is what make dist names a build by (git describe --tags --always --dirty) and
// the commit checked out; the test is skipped outside a git checkout.
func gitVersion(t *testing.T, root string) (version, commit string) {
	t.Helper()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("not a git checkout: git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	return git("describe", "--tags", "--always", "--dirty"), git("rev-parse", "HEAD")
}

// buildEnv is this environment without what would change a build behind the test's back:
// make's variables and flags from a make that runs the tests, and the Makefile's own.
func buildEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains([]string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DIST", "ARCH", "VERSION", "COMMIT", "GOBIN"}, name)
	})
}

// checkSum checks that file in dir is a checksum line, as sha256sum writes it, of name.
func checkSum(t *testing.T, dir, file, name string) {
	t.Helper()
	sum := sha256.Sum256(readFile(t, filepath.Join(dir, name)))
	if got, want := string(readFile(t, filepath.Join(dir, file))), hex.EncodeToString(sum[:])+"  "+name+"\n"; got != want {
		t.Errorf("%s says %q, want %q", file, got, want)
	}
}

// unpack unpacks a release archive into dir; it must hold the binary, its checksum,
// README.md and LICENSE, and nothing else.
func unpack(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	r := tar.NewReader(gz)
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "/") {
			t.Fatalf("%s: %s is not a plain file at the top", archive, h.Name)
		}
		names = append(names, h.Name)
		b, err := io.ReadAll(r)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, h.Name), b, h.FileInfo().Mode().Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"LICENSE", "README.md", "lockbreaker", "lockbreaker.sha256"}; !slices.Equal(slices.Sorted(slices.Values(names)), want) {
		t.Errorf("%s holds %q, want %q", archive, names, want)
	}
}

// inDir runs program with args in dir, with Docker out of reach, as lockbreaker does.
func inDir(t *testing.T, dir, program string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(program, args...)
	cmd.Dir = dir
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, asLockbreaker+"=") }),
		"DOCKER_HOST=unix:///nonexistent/docker.sock")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
