package cli

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/internal/testbin"
	"github.com/lockbreaker/lockbreaker/internal/tier"
	"github.com/lockbreaker/lockbreaker/results"
)

var binary string

// killable is a copy of binary that only the tests which kill runs start: the processes they
// count as theirs, and kill when left behind, are then theirs alone (make test runs binary in
// the examples' tests beside them).
var killable string

// asLockbreaker, set in a process's environment, makes this test binary lockbreaker itself.
const asLockbreaker = "LOCKBREAKER_CLI_TEST_AS_MAIN"

// TestMain finds the real binary (make test's, or one it builds): these tests run it as a
// user would. The fast tier (-short), run by hand, has no binary to hand and none of its
// tests needs Docker: this test binary, which holds all of lockbreaker, is run as the
// binary instead of linking another (the longest step of the fast tier).
func TestMain(m *testing.M) {
	if os.Getenv(asLockbreaker) == "1" {
		Main()
	}
	flag.Parse()
	// The fast tier's tests wait on the processes they start, the tutorial's runs of a set
	// length above all: four at a time keep both CPUs busy.
	tier.FastParallel(4)
	dir, err := os.MkdirTemp("", "lockbreaker-cli")
	if err != nil {
		panic(err)
	}
	if testing.Short() && os.Getenv(testbin.Env) == "" {
		binary, err = os.Executable()
		os.Setenv(asLockbreaker, "1") // for every process the tests start, workers too
	} else if binary, err = testbin.Path(dir); err == nil {
		killable, err = copyFile(binary, filepath.Join(dir, "killable", "lockbreaker"))
	}
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// copyFile copies file src to dst, with its mode, and returns dst.
func copyFile(src, dst string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(src)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(dst), 0o755)
	}
	if err == nil {
		err = os.WriteFile(dst, b, info.Mode().Perm())
	}
	return dst, err
}

func lockbreaker(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	code, stdout, stderr, err := runLockbreaker(env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return code, stdout, stderr
}

// runLockbreaker runs the binary with args, env added to this process's environment, and
// says how it exited and what it wrote; err only when it could not be run.
func runLockbreaker(env []string, args ...string) (code int, stdout, stderr string, err error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String(), nil
	}
	return 0, out.String(), errb.String(), err
}

func TestBadInputGetsOneLineAndItsExitCode(t *testing.T) {
	t.Parallel() // processes, beside the other tests'
	notADir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notADir, []byte("x"), 0o644)
	badSuite := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(badSuite, []byte("cells: [{spec: {system: local}, expect: {stats: valid}, hazards: {grant-lots: 3}}]\n"), 0o644)
	corrupt := t.TempDir()
	os.WriteFile(filepath.Join(corrupt, "history.jsonl"),
		[]byte(`{"index":0,"type":"invoke","process":0,"f":"acquire","key":"lock","time":5}`+"\n{not json\n"), 0o644)
	validRun, otherVersion := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(validRun, "results.json"), []byte(`{"test":"t","verdict":"valid","spec":{"system":"redis"}}`), 0o644)
	os.WriteFile(filepath.Join(otherVersion, "results.json"), []byte(`{"test":"t","verdict":"invalid","results":"a list once"}`), 0o644)
	for _, dir := range []string{validRun, otherVersion} {
		os.WriteFile(filepath.Join(dir, "history.jsonl"), nil, 0o644)
	}
	// A lock client's program missing its runtime, which says so on stderr and ends.
	noRuntime := filepath.Join(t.TempDir(), "mylock")
	os.WriteFile(noRuntime, []byte("#!/bin/sh\necho 'mylock: no java on PATH: install openjdk-17-jdk-headless' >&2\nexit 1\n"), 0o755)
	noRuntimeSuite := filepath.Join(t.TempDir(), "mylock.yaml")
	os.WriteFile(noRuntimeSuite, []byte("cells: [{spec: {system: zookeeper, client: exec, client_cmd: ["+noRuntime+"]}, expect: {stats: valid}}]\n"), 0o644)
	badSystem := filepath.Join(t.TempDir(), "system.yaml")
	os.WriteFile(badSystem, []byte("name: mine\nnodes: 1\nport: 7070\ncommand: [lockd]\nready: {tcp: true}\nclients: [redis]\nreplicas: 3\n"), 0o644)
	zkSystem := filepath.Join(t.TempDir(), "zk.yaml")
	os.WriteFile(zkSystem, []byte("name: myzk\nnodes: 1\nport: 2181\ncommand: [zkd]\nready: {tcp: true}\nclients: [zookeeper]\n"), 0o644)
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no command", nil, nil, 254, "no command given"},
		{"a program missing its runtime", nil, []string{"run", "--system", "zookeeper", "--client", "exec", "--client-cmd", noRuntime}, 254,
			"ended (exit status 1) before it read its configuration: mylock: no java on PATH: install openjdk-17-jdk-headless"},
		{"a suite's program missing its runtime", nil, []string{"suite", noRuntimeSuite, "--results", filepath.Join(t.TempDir(), "results")}, 254,
			"before it read its configuration: mylock: no java on PATH"},
		{"a system file with an unknown key", nil, []string{"run", "--system-file", badSystem}, 254, `unknown key "replicas"`},
		{"a missing system file", nil, []string{"run", "--system-file", badSystem + ".gone"}, 254, "no such file or directory"},
		{"a client that does not speak a system file's system", nil, []string{"run", "--system-file", zkSystem, "--client", "redis"}, 254,
			`client "redis" runs on redis and sentinel, not on "myzk"`},
		{"a built-in system and a system file", nil, []string{"run", "--system", "etcd", "--system-file", zkSystem}, 254,
			`--system "etcd" and --system-file`},
		{"a size a system file does not allow", nil, []string{"run", "--system-file", zkSystem, "--client", "zookeeper", "--nodes", "3"}, 254,
			"myzk: 3 nodes (it has 1)"},
		{"shrink a valid run", nil, []string{"shrink", validRun}, 254, "was valid, not invalid: there is no failure to shrink"},
		{"shrink another version's run", nil, []string{"shrink", otherVersion}, 254, "is not this version's"},
		{"shrink a missing run", nil, []string{"shrink", filepath.Join(validRun, "gone")}, 254, "no such file or directory"},
		{"shrink two runs", nil, []string{"shrink", validRun, otherVersion}, 254, "give one run directory"},
		{"shrink with no confirmation", nil, []string{"shrink", "--confirm", "0", validRun}, 254, "--confirm must be between 1 and 100"},
		{"faults without a nemesis", nil, []string{"run", "--nemesis", "none", "--faults", "2"}, 254, "nemesis none injects none"},
		{"unknown command", nil, []string{"explode"}, 254, `unknown command "explode"`},
		{"help on an unknown command", nil, []string{"help", "xyz"}, 254, `help: unknown command "xyz"`},
		{"help on two commands", nil, []string{"help", "run", "check"}, 254, "give at most one command"},
		{"unknown flag", nil, []string{"run", "--colour", "red"}, 254, "flag provided but not defined"},
		{"stray argument", nil, []string{"run", "redis"}, 254, `unexpected argument "redis"`},
		{"unknown system", nil, []string{"run", "--system", "consul"}, 254, `unknown system "consul"`},
		{"unknown nemesis", nil, []string{"run", "--nemesis", "meteor"}, 254, `unknown nemesis "meteor"`},
		{"a pooler in front of redis", nil, []string{"run", "--pooler", "pgbouncer-transaction"}, 254,
			"--pooler applies to postgres, not redis, which has no pooler in front of it"},
		{"an unknown pooler", nil, []string{"run", "--system", "postgres", "--nemesis", "none", "--pooler", "odyssey"}, 254,
			`--pooler must be pgbouncer-session or pgbouncer-transaction, got "odyssey"`},
		{"zero ttl", nil, []string{"run", "--ttl", "0s"}, 254, "--ttl must be between 1ms and 1h, got 0s"},
		{"huge ttl", nil, []string{"run", "--ttl", "2h"}, 254, "--ttl must be between 1ms and 1h"},
		{"bad duration", nil, []string{"run", "--ttl", "soon"}, 254, "invalid value"},
		{"too many clients", nil, []string{"run", "--clients", "101"}, 254, "--clients must be between 1 and 100, got 101"},
		{"huge time limit", nil, []string{"run", "--time-limit", "25h"}, 254, "--time-limit must be between 1ms and 24h"},
		{"huge pause", nil, []string{"run", "--pause", "25h"}, 254, "--pause must be between 0s and 24h"},
		{"negative pause", nil, []string{"run", "--pause", "-1s"}, 254, "--pause must be between 0s and 24h"},
		{"huge interval", nil, []string{"run", "--interval", "2000000h"}, 254, "--interval must be between 1ms and 24h"},
		{"huge clock offset", nil, []string{"run", "--clock-offset", "25h"}, 254, "--clock-offset must be between 0s and 24h"},
		{"NaN clock rate", nil, []string{"run", "--clock-rate", "NaN"}, 254, "--clock-rate must be a number above 0 and at most 100, got NaN"},
		{"infinite clock rate", nil, []string{"run", "--clock-rate", "+Inf"}, 254, "got +Inf"},
		{"minus infinite clock rate", nil, []string{"run", "--clock-rate", "-Inf"}, 254, "got -Inf"},
		{"empty results", nil, []string{"run", "--results", ""}, 254, "--results must name a directory"},
		{"test with escapes", nil, []string{"run", "--test", "t\x1b[2J\r"}, 254, `--test must be printable text, got "t\x1b[2J\r"`},
		{"key with backspace", nil, []string{"run", "--key", "lock\b"}, 254, "--key must be a non-empty word of printable characters"},
		{"bad fencing", nil, []string{"run", "--fencing", "maybe"}, 254, "--fencing must be on or off"},
		{"unwritable results", nil, []string{"run", "--results", notADir}, 254, "is not writable"},
		{"unknown hazard in a suite file", nil, []string{"suite", badSuite}, 254, `requires hazard "grant-lots", which does not exist`},
		{"corrupt history", nil, []string{"check", corrupt}, 254, "history.jsonl:2: not a JSON event"},
		{"not a run", nil, []string{"check", t.TempDir()}, 254, "not a run directory"},
		{"tiny check timeout", nil, []string{"check", "--timeout", "1us", t.TempDir()}, 254, "check: --timeout must be 0 (no limit) or between 1ms and 24h, got 1µs"},
		{"huge check timeout", nil, []string{"check", "--timeout", "25h", t.TempDir()}, 254, "--timeout must be 0 (no limit) or between 1ms and 24h"},
		{"whole with a limit", nil, []string{"check", "--whole", "--max-ops", "10", t.TempDir()}, 254, "check: --whole holds the whole history: --max-ops does not go with it"},
		{"bad check timeout", nil, []string{"check", "--timeout", "soon", t.TempDir()}, 254, "invalid value"},
		{"docker unreachable", []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"},
			[]string{"run", "--results", t.TempDir()}, 255, "docker is not reachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // a process each
			args := c.args
			// Bad arguments are refused before anything is made: give a results directory
			// where there is none and see that it stays absent.
			untouched := filepath.Join(t.TempDir(), "results")
			if c.code == 254 && len(args) > 0 && args[0] == "run" && !slices.Contains(args, "--results") {
				args = append(slices.Clone(args), "--results", untouched)
			}
			code, stdout, stderr := lockbreaker(t, c.env, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q, stdout %q)", code, c.code, stderr, stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("stderr %q: want one line containing %q", stderr, c.want)
			}
			if i := strings.IndexFunc(lines[0], unicode.IsControl); i >= 0 {
				t.Errorf("stderr %q: control character at %d", stderr, i)
			}
			if _, err := os.Stat(untouched); !os.IsNotExist(err) {
				t.Errorf("a refused run made %s (stat: %v)", untouched, err)
			}
		})
	}
}

// A huge value, from a flag, a history or a suite file, makes an error of one short line:
// the value's start and how long it was. (YAML takes a key longer than 1024 characters
// only after a "? ".)
func TestBadInputQuotesLongValuesShort(t *testing.T) {
	t.Parallel() // processes, beside the other tests'
	long := strings.Repeat("a", 102400)
	start := `"` + long[:200] + `…" (102400 bytes)`
	history := t.TempDir()
	os.WriteFile(filepath.Join(history, "history.jsonl"), []byte(`{"index":0,"type":"invoke","process":0,"f":"acquire","key":"lock","time":5}`+"\n"+
		`{"index":1,"type":"fail","process":0,"f":"acquire","key":"lock","time":6,"error":"`+long+`"}`+"\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown command", []string{long}, "unknown command " + start},
		{"a stray argument", []string{"run", long}, "unexpected argument " + start},
		{"a flag's bad value", []string{"run", "--ttl", long}, `invalid value ` + start + ` for flag -ttl`},
		{"an unknown flag", []string{"run", "--" + long}, `flag provided but not defined: "-` + long[:199] + `…" (102401 bytes)`},
		{"an unknown system", []string{"run", "--system", long}, "unknown system " + start},
		{"an unknown nemesis", []string{"run", "--nemesis", long}, "unknown nemesis " + start},
		{"an unknown client", []string{"run", "--client", long}, "unknown client " + start},
		{"a key", []string{"run", "--key", long + "/"}, `--key must be a non-empty word of printable characters, without / or \, got "` + long[:200] + `…" (102401 bytes)`},
		{"a test name", []string{"run", "--test", long + "\x1b"}, `--test must be printable text, got "` + long[:200] + `…" (102401 bytes)`},
		{"a fencing setting", []string{"run", "--fencing", long}, "--fencing must be on or off, got " + start},
		{"a persistence setting", []string{"run", "--persistence", long}, "--persistence of redis is one of none, aof-everysec, aof-always, got " + start},
		{"an unknown suite", []string{"suite", long}, "suite: " + start + " is neither a built-in suite"},
		{"a shard", []string{"suite", "--shard", long, "smoke"}, "--shard must be i/n with 1 <= i <= n, e.g. 2/4, got " + start},
		{"a suite file's unknown key", []string{"suite", writeSuite(t, "cells:\n  - spec:\n      ? "+long+"\n      : 1\n    expect: {stats: valid}\n")}, "unknown field " + start},
		{"a suite file's duration", []string{"suite", writeSuite(t, "cells: [{spec: {ttl: "+long+"}, expect: {stats: valid}}]\n")}, "invalid duration " + start},
		{"a suite file's checker", []string{"suite", writeSuite(t, "cells:\n  - spec: {system: local}\n    expect:\n      ? "+long+"\n      : valid\n")}, "of checker " + start},
		{"a suite file's expectation", []string{"suite", writeSuite(t, "cells: [{spec: {system: local}, expect: {stats: "+long+"}}]\n")}, "got " + start},
		{"a history's error kind", []string{"check", history}, "unknown error kind " + start},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // a process each
			args := c.args
			if args[0] == "run" || args[0] == "suite" {
				args = append(slices.Clone(args), "--results", filepath.Join(t.TempDir(), "results"))
			}
			code, _, stderr := lockbreaker(t, nil, args...)
			if code != command.ExitBadInput {
				t.Errorf("exit %d, want %d", code, command.ExitBadInput)
			}
			if !strings.Contains(stderr, c.want) || len(stderr) > 1000 {
				t.Errorf("stderr %.1200q (%d bytes): want at most 1000 bytes holding %q", stderr, len(stderr), c.want)
			}
		})
	}
}

// Every command's help, however asked for, is its usage with every flag and its default,
// and examples, on stdout with exit 0.
func TestHelpListsEveryFlagAndExamples(t *testing.T) {
	t.Parallel() // processes, beside the other tests'
	for _, c := range commands {
		for _, args := range [][]string{{"help", c.Name}, {c.Name, "-h"}, {c.Name, "--help"}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel() // a process each
				code, stdout, stderr := lockbreaker(t, nil, args...)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				want := []string{"usage: lockbreaker " + c.Name, "-h, --help", "exit codes:"}
				if c.Name != "worker" {
					want = append(want, "examples:\n  lockbreaker ")
				}
				if c.Flags != nil {
					c.Flags().VisitAll(func(f *flag.Flag) {
						want = append(want, "--"+f.Name+" ")
						if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" {
							want = append(want, "(default "+f.DefValue+")")
						}
					})
				}
				for _, w := range want {
					if !strings.Contains(stdout, w) {
						t.Errorf("help lacks %q:\n%s", w, stdout)
					}
				}
			})
		}
	}
}

func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := lockbreaker(t, nil, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			for _, c := range commands {
				if !strings.Contains(stdout, "\n  "+c.Name+" ") {
					t.Errorf("command list lacks %s:\n%s", c.Name, stdout)
				}
			}
		})
	}
}

// version needs no Docker: the image tag is a hash of files compiled into the binary.
func TestVersion(t *testing.T) {
	code, stdout, stderr := lockbreaker(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "version")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := "node image " + containers.ImageRef() + "\n"
	if !strings.HasPrefix(stdout, "lockbreaker ") || !strings.HasSuffix(stdout, want) {
		t.Errorf("version said %q, want lockbreaker VERSION then %q", stdout, want)
	}
}

// version names the version and the commit in every way of building: go install of a tag
// or of a commit (the module's version), go build or go install in a checkout (its VCS
// information), make build and make dist (stamped with -ldflags -X, VCS information or not).
func TestDescribeBuild(t *testing.T) {
	const rev = "2d94b83abcdef0123456789abcdef0123456789a"
	module := func(version string) debug.Module {
		return debug.Module{Path: "github.com/lockbreaker/lockbreaker", Version: version}
	}
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	cases := []struct {
		name            string
		info            *debug.BuildInfo
		version, commit string // stamped
		want            string
	}{
		{"no vcs", &debug.BuildInfo{Main: module("(devel)")}, "", "", "(devel), built with go1.26.0"},
		{"clean commit", &debug.BuildInfo{Main: module("(devel)"), Settings: vcs("false")}, "", "",
			"(devel), commit " + rev + ", built with go1.26.0"},
		{"local changes", &debug.BuildInfo{Main: module("(devel)"), Settings: vcs("true")}, "", "",
			"(devel), commit " + rev + " with local changes, built with go1.26.0"},
		{"go build in a checkout", &debug.BuildInfo{Main: module("v0.0.0-20261203130524-2d94b83abcde+dirty"), Settings: vcs("true")}, "", "",
			"v0.0.0-20261203130524-2d94b83abcde+dirty, commit " + rev + " with local changes, built with go1.26.0"},
		{"go install of a tag", &debug.BuildInfo{Main: module("v1.2.0")}, "", "", "v1.2.0, built with go1.26.0"},
		{"go install of a commit", &debug.BuildInfo{Main: module("v0.0.0-20261203130524-2d94b83abcde")}, "", "",
			"v0.0.0-20261203130524-2d94b83abcde, commit 2d94b83abcde, built with go1.26.0"},
		{"go install of a commit after a tag", &debug.BuildInfo{Main: module("v1.2.1-0.20261203130524-2d94b83abcde")}, "", "",
			"v1.2.1-0.20261203130524-2d94b83abcde, commit 2d94b83abcde, built with go1.26.0"},
		{"go install of a commit after a pre-release", &debug.BuildInfo{Main: module("v1.3.0-rc.1.0.20261203130524-2d94b83abcde")}, "", "",
			"v1.3.0-rc.1.0.20261203130524-2d94b83abcde, commit 2d94b83abcde, built with go1.26.0"},
		{"make dist, -buildvcs=false", &debug.BuildInfo{Main: module("(devel)")}, "v1.2.0-3-g2d94b83", rev,
			"v1.2.0-3-g2d94b83, commit " + rev + ", built with go1.26.0"},
		{"make dist, local changes", &debug.BuildInfo{Main: module("(devel)")}, "2d94b83-dirty", rev,
			"2d94b83-dirty, commit " + rev + " with local changes, built with go1.26.0"},
		{"make dist, with vcs", &debug.BuildInfo{Main: module("v0.0.0-20261203130524-2d94b83abcde"), Settings: vcs("false")}, "2d94b83", rev,
			"2d94b83, commit " + rev + ", built with go1.26.0"},
		{"make dist, with local changes and vcs", &debug.BuildInfo{Main: module("v0.0.0-20261203130524-2d94b83abcde+dirty"), Settings: vcs("true")},
			"2d94b83-dirty", rev, "2d94b83-dirty, commit " + rev + " with local changes, built with go1.26.0"},
		// A linked worktree inside another checkout: Go records the other's VCS information.
		{"make build in a nested worktree", &debug.BuildInfo{Main: module("v0.0.0-20261101090000-0123456789ab+dirty"),
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}},
			"2d94b83", rev, "2d94b83, commit " + rev + ", built with go1.26.0"},
		{"no build information", nil, "", "", "(no build information)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.info != nil {
				c.info.GoVersion = "go1.26.0"
			}
			got := describeBuild(c.info, c.version, c.commit)
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	cases := []struct{ in, want string }{
		{"2 overlapping holds", "2 overlapping holds"},
		{"données sûres, 数据", "données sûres, 数据"},
		{"\x1b[2J\x1b[31mOK", `\x1b[2J\x1b[31mOK`},
		{"VIOLATED\rOK      ", `VIOLATED\rOK      `},
		{"bad\b\b\bok", `bad\b\b\bok`},
		{"tab\there", `tab\there`},
		{"two\nlines", `two\nlines`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b2J", `c1 \u009b2J`},
		{"bidi \u202eKO", `bidi \u202eKO`},
		{"not utf-8 \xff\xfe", `not utf-8 \xff\xfe`},
	}
	for _, c := range cases {
		if got := command.Escape(c.in); got != c.want {
			t.Errorf("command.Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A saved run is input anyone may have written: what it says reaches the terminal escaped.
func TestPrintVerdictsEscapesAHostileSummary(t *testing.T) {
	s := results.Summary{
		Test:    "t\x1b]0;owned\a",
		Verdict: checkers.Invalid,
		Results: []checkers.Result{{Checker: "mutual-exclusion\r", Verdict: checkers.Invalid,
			Summary: "\x1b[2K\rmutual-exclusion  VALID\b\b"}},
		Notes: []string{"\x1b[2J"},
		Error: "boom\r\nsecond line",
	}
	var out bytes.Buffer
	command.PrintVerdicts(&out, "/runs/x\x1b[8m", s)
	text := out.String()
	if i := strings.IndexFunc(text, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }); i >= 0 {
		t.Fatalf("control character at %d in:\n%q", i, text)
	}
	for _, want := range []string{`\x1b[2K\rmutual-exclusion  VALID\b\b`, `note: \x1b[2J`, `boom\r; second line`, `t\x1b]0;owned\a: INVALID`} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// check on a saved run whose results.json says hostile things prints them escaped.
func TestCheckEscapesAHostileSavedSummary(t *testing.T) {
	dir := runDir(t, "testdata/safe.jsonl")
	saved := `{"test":"t\u001b]0;owned\u0007","notes":["\u001b[2J\u001b[H"],"error":"x\r\u0008"}`
	os.WriteFile(filepath.Join(dir, "results.json"), []byte(saved), 0o644)
	code, stdout, stderr := lockbreaker(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "check", dir)
	// The saved harness error makes the verdict unknown.
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, stdout, stderr)
	}
	if i := strings.IndexFunc(stdout, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }); i >= 0 {
		t.Errorf("control character at %d in:\n%q", i, stdout)
	}
	if !strings.Contains(stdout, `note: \x1b[2J\x1b[H`) || !strings.Contains(stdout, `t\x1b]0;owned\a: UNKNOWN`) {
		t.Errorf("hostile text not shown escaped:\n%s", stdout)
	}
}

// When the run directory cannot take the new files, check still prints its verdicts, then
// one line saying what it could not write, and exits 255. A directory where report.html
// should be stops the write even for root, whom permissions do not stop.
func TestCheckPrintsVerdictsWhenItCannotWrite(t *testing.T) {
	dir := runDir(t, "testdata/stale-write.jsonl")
	blocker := filepath.Join(dir, "report.html")
	os.MkdirAll(filepath.Join(blocker, "keep"), 0o755)
	code, stdout, stderr := lockbreaker(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "check", dir)
	if code != 255 {
		t.Fatalf("exit %d, want 255\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "data-safety") || !strings.Contains(stdout, "INVALID") {
		t.Errorf("verdicts not printed:\n%s", stdout)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "could not write the results files") || !strings.Contains(lines[0], "report.html") {
		t.Errorf("stderr %q: want one line saying report.html could not be written", stderr)
	}
}

// runDir makes a run directory holding a copy of a saved history.
func runDir(t *testing.T, history string) string {
	t.Helper()
	data, err := os.ReadFile(history)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A saved history is checked again with no Docker at all, with the verdict as exit code.
func TestCheckRerunsCheckersOnASavedRun(t *testing.T) {
	for _, c := range []struct {
		name, history string
		flags         []string
		code          int
	}{
		{"safe", "testdata/safe.jsonl", nil, 0},
		{"stale write", "testdata/stale-write.jsonl", nil, 1},
		{"longer search", "testdata/stale-write.jsonl", []string{"--timeout", "10m"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := runDir(t, c.history)
			args := append(append([]string{"check"}, c.flags...), dir)
			code, stdout, stderr := lockbreaker(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.code, stdout, stderr)
			}
			for _, f := range []string{"results.json", "report.html", "junit.xml"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("check did not write %s: %v", f, err)
				}
			}
			if !strings.Contains(stdout, "data-safety") {
				t.Errorf("verdicts not printed:\n%s", stdout)
			}
		})
	}
}

// dockerList lists, in format, the labelled containers or networks ("container",
// "network") that match every filter.
func dockerList(t *testing.T, what, format string, filters ...string) []string {
	t.Helper()
	args := []string{what, "ls", "--filter", "label=org.lockbreaker.project", "--format", format}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	if what == "container" {
		args = append(args, "-a")
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// A run killed with SIGKILL cannot clean up after itself: its workers die with it
// (Pdeathsig) and `lockbreaker clean` removes its containers and network.
func TestCleanRemovesWhatAKilledRunLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	cmd := exec.Command(binary, "run", "--time-limit", "2m", "--results", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	workers := startedWorkers(t, cmd)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	pid := cmd.Process.Pid
	if len(ownedBy(t, "container", pid)) == 0 || len(ownedBy(t, "network", pid)) == 0 {
		t.Fatal("the killed run left nothing behind: the test proves nothing")
	}
	// The kernel kills them as the harness dies (Pdeathsig); on a busy machine they may
	// take seconds to be reaped.
	for deadline := time.Now().Add(time.Minute); len(stillRunning(t, workers)) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("workers outlived the killed harness")
		}
	}
	code, stdout, stderr := lockbreaker(t, nil, "clean")
	if code != 0 {
		t.Fatalf("clean: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "removed") {
		t.Errorf("clean said %q", stdout)
	}
	if c, n := ownedBy(t, "container", pid), ownedBy(t, "network", pid); len(c)+len(n) > 0 {
		t.Errorf("after clean: containers %v networks %v", c, n)
	}
}

// Ctrl-C or SIGTERM stops a run early: faults are healed, workers stopped, containers
// removed, and what was recorded is still checked and reported.
func TestInterruptedRunCleansUpAndKeepsItsHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	results := t.TempDir()
	cmd := exec.Command(binary, "run", "--time-limit", "2m", "--results", results)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	workers := startedWorkers(t, cmd)
	waitCompletedOp(t, cmd, results)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %v, stderr %q: want 255 and 'interrupted'", err, stderr.String())
	}
	if c, n := ownedBy(t, "container", cmd.Process.Pid), ownedBy(t, "network", cmd.Process.Pid); len(c)+len(n) > 0 {
		t.Errorf("after SIGTERM: containers %v networks %v left", c, n)
	}
	if left := stillRunning(t, workers); len(left) > 0 {
		t.Errorf("workers outlived the interrupted run: %v", left)
	}
	data, err := os.ReadFile(filepath.Join(results, "latest", "results.json"))
	if err != nil || !strings.Contains(string(data), "interrupted") || !strings.Contains(string(data), "mutual-exclusion") {
		t.Errorf("results.json of the interrupted run: %v %.200s", err, data)
	}
}

// A node a fault took down that does not serve again is the service's failure: the run
// ends there with its verdict (unknown, exit 2), a note naming the node and its log, and
// nothing left behind; it is not a harness error. The server here starts once: started
// again, it exits, as a server whose data a power loss cut short does.
func TestANodeThatDoesNotComeBackEndsTheRunUnknown(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	once := filepath.Join(t.TempDir(), "once.yaml")
	os.WriteFile(once, []byte(`name: once
nodes: 1
port: 6379
command: [/bin/sh, -c, "test -e /tmp/started && { echo cannot load its data; exit 3; }; touch /tmp/started; exec redis-server --save '' --protected-mode no"]
ready: {send: PING, expect: +PONG}
clients: [redis]
`), 0o644)
	results := t.TempDir()
	code, out, errs := lockbreaker(t, nil, "run", "--system-file", once, "--nemesis", "kill-node", "--interval", "1s",
		"--time-limit", "1m", "--results", results)
	if code != command.ExitUnknown || errs != "" {
		t.Fatalf("exit %d, stderr %q: want 2 and nothing on stderr\n%s", code, errs, out)
	}
	for _, want := range []string{"node n1 did not serve again after the faults: the run ends here (its log: nodes/n1.log)",
		"note: node n1 exited (", "after a fault took it down: the service did not come back", "(the log: nodes/n1.log)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the run did not say %q:\n%s", want, out)
		}
	}
	if log, err := os.ReadFile(filepath.Join(results, "latest", "nodes", "n1.log")); !strings.Contains(string(log), "cannot load its data") {
		t.Errorf("the node's log (%v) lacks its last words: %q", err, log)
	}
	if m := printedRun.FindStringSubmatch(out); m == nil || len(dockerList(t, "container", "{{.ID}}", "label=org.lockbreaker.run="+m[1])) > 0 {
		t.Errorf("containers of the run %v left", m)
	}
}

// startedWorkers waits until the run of cmd has started its workers, at most three minutes,
// and returns them. Only its own: other tests' runs of the same binary have workers too.
func startedWorkers(t *testing.T, cmd *exec.Cmd) []process {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var workers []process
		for _, p := range processes(t) {
			if p.ppid == cmd.Process.Pid && p.state != "Z" && strings.HasSuffix(p.args, " worker") {
				workers = append(workers, p)
			}
		}
		if len(workers) > 0 {
			return workers
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the run never started its workers")
		}
	}
}

// waitCompletedOp waits until the run of cmd, writing under results, has recorded an
// operation's completion in its history, at most three minutes.
func waitCompletedOp(t *testing.T, cmd *exec.Cmd, results string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(results, "*", "*", "history.jsonl"))
		for _, f := range files {
			if data, err := os.ReadFile(f); err == nil && bytes.Contains(data, []byte(`"type":"ok"`)) {
				return
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the run recorded no completed operation")
		}
	}
}

// stillRunning returns those of procs that still run: the same pid and command line, not a zombie.
func stillRunning(t *testing.T, procs []process) []process {
	t.Helper()
	var running []process
	for _, p := range processes(t) {
		if p.state != "Z" && slices.ContainsFunc(procs, func(q process) bool { return q.pid == p.pid && q.args == p.args }) {
			running = append(running, p)
		}
	}
	return running
}
