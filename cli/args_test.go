package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every command takes its flags before, between or after its arguments, and "--" ends
// them: "shrink store/latest --results out" is "shrink --results out store/latest". Each
// command's arguments are given in each order, and each order must answer alike.
func TestFlagsGoAnywhere(t *testing.T) {
	t.Parallel() // processes, beside the other tests'
	nodocker := []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}
	stale := func() string { return runDir(t, "testdata/stale-write.jsonl") }
	validRun := t.TempDir()
	os.WriteFile(filepath.Join(validRun, "results.json"), []byte(`{"test":"t","verdict":"valid","spec":{"system":"redis"}}`), 0o644)
	os.WriteFile(filepath.Join(validRun, "history.jsonl"), nil, 0o644)
	judged := stale()
	if code, stdout, stderr := lockbreaker(t, nodocker, "check", judged); code != 1 {
		t.Fatalf("check %s: exit %d\n%s%s", judged, code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "out")
	cases := []struct {
		command string
		orders  func() [][]string // the same arguments in different orders, made afresh
		code    int
		want    string // in stderr when code is 254, else in stdout
	}{
		{"check", func() [][]string {
			return [][]string{{"check", "--max-ops", "1000", stale()}, {"check", stale(), "--max-ops", "1000"},
				{"check", "--max-ops", "1000", "--", stale()}}
		}, 1, "data-safety"},
		{"check", func() [][]string {
			return [][]string{{"check", "--timeout", "1us", judged}, {"check", judged, "--timeout", "1us"}}
		}, 254, "check: --timeout must be 0 (no limit) or between 1ms and 24h"},
		{"check", func() [][]string { return [][]string{{"check", "--", "--timeout"}} }, 254, "--timeout"},
		{"report", func() [][]string { return [][]string{{"report", "-h", judged}, {"report", judged, "-h"}} }, 0, "usage: lockbreaker report"},
		{"report", func() [][]string { return [][]string{{"report", judged, "--whole"}} }, 254, "flag provided but not defined: -whole"},
		{"shrink", func() [][]string {
			return [][]string{{"shrink", "--results", out, validRun}, {"shrink", validRun, "--results", out}}
		}, 254, "was valid, not invalid: there is no failure to shrink"},
		{"shrink", func() [][]string {
			return [][]string{{"shrink", "--confirm", "0", validRun}, {"shrink", validRun, "--confirm", "0"}}
		}, 254, "shrink: --confirm must be between 1 and 100"},
		{"shrink", func() [][]string { return [][]string{{"shrink", validRun, "--results", out, judged}} }, 254, "give one run directory"},
		{"suite", func() [][]string {
			return [][]string{{"suite", "--seeds", "0", "smoke"}, {"suite", "smoke", "--seeds", "0"}}
		}, 254, "suite: --seeds must be between 1 and 1000, got 0"},
		{"suite", func() [][]string {
			return [][]string{{"suite", "merge", "--results", "", judged}, {"suite", "merge", judged, "--results", ""}}
		}, 254, "suite merge: --results must name a directory"},
		{"suite", func() [][]string {
			return [][]string{{"suite", "compare", "--nope", judged, judged}, {"suite", "compare", judged, judged, "--nope"}}
		}, 254, "flag provided but not defined: -nope"},
		{"run", func() [][]string {
			return [][]string{{"run", "--ttl", "1s", "redis"}, {"run", "redis", "--ttl", "1s"}}
		}, 254, `run: unexpected argument "redis"`},
		{"hunt", func() [][]string {
			return [][]string{{"hunt", "--budget", "0s", "now"}, {"hunt", "now", "--budget", "0s"}}
		}, 254, `hunt: unexpected argument "now"`},
		{"serve", func() [][]string {
			return [][]string{{"serve", "--addr", "127.0.0.1:0", "store"}, {"serve", "store", "--addr", "127.0.0.1:0"}}
		}, 254, `serve: unexpected argument "store"`},
		{"clean", func() [][]string { return [][]string{{"clean", "--all", "now"}, {"clean", "now", "--all"}} }, 254, `clean: unexpected argument "now"`},
		{"images", func() [][]string {
			return [][]string{{"images", "--system", "redis", "all"}, {"images", "all", "--system", "redis"}}
		}, 254, `images: unexpected argument "all"`},
		{"machines", func() [][]string {
			return [][]string{{"machines", "check", "--max-clock-offset", "1s", "extra"}, {"machines", "check", "extra", "--max-clock-offset", "1s"}}
		}, 254, `machines check: unexpected argument "extra"`},
		{"machines", func() [][]string {
			return [][]string{{"machines", "up", "0", "--system", "redis"}, {"machines", "--system", "redis", "up", "0"}}
		}, 254, `machines up: N is how many stand-ins, 1 to 9, got "0"`},
		{"version", func() [][]string { return [][]string{{"version", "-h", "x"}, {"version", "x", "-h"}} }, 0, "usage: lockbreaker version"},
		{"worker", func() [][]string { return [][]string{{"worker", "x", "-h"}, {"worker", "-h", "x"}} }, 0, "usage: lockbreaker worker"},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		tested[c.command] = true
		for _, args := range c.orders() {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := lockbreaker(t, nodocker, args...)
				got := stderr
				if c.code != 254 {
					got = stdout
				}
				if code != c.code || !strings.Contains(got, c.want) {
					t.Errorf("exit %d, want %d with %q\nstdout %s\nstderr %s", code, c.code, c.want, stdout, stderr)
				}
				if c.code == 254 && strings.Count(stderr, "\n") != 1 {
					t.Errorf("stderr %q: want one line", stderr)
				}
			})
		}
	}
	for _, cmd := range commands {
		if !tested[cmd.Name] {
			t.Errorf("command %s: no case gives it its flags after its arguments", cmd.Name)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused shrink made %s (stat: %v)", out, err)
	}
}
