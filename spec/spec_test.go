package spec

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNormalizeRejectsBadSpecs(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"unknown system", func(s *Spec) { s.System = "consul" }, `unknown system "consul"`},
		{"unknown client", func(s *Spec) { s.Client = "nope" }, `unknown client "nope"`},
		{"unknown nemesis", func(s *Spec) { s.Nemesis = []string{"pause-holder", "meteor"} }, `unknown nemesis "meteor"`},
		{"zero ttl", func(s *Spec) { s.TTL = 0 }, "--ttl must be between 1ms and 1h, got 0s"},
		{"negative ttl", func(s *Spec) { s.TTL = Duration(-time.Second) }, "--ttl must be between 1ms and 1h"},
		{"sub-millisecond ttl", func(s *Spec) { s.TTL = Duration(time.Microsecond) }, "--ttl must be between 1ms and 1h"},
		{"huge ttl", func(s *Spec) { s.TTL = Duration(math.MaxInt64) }, "--ttl must be between 1ms and 1h"},
		{"no clients", func(s *Spec) { s.Clients = 0 }, "--clients must be between 1 and 100, got 0"},
		{"too many clients", func(s *Spec) { s.Clients = 101 }, "--clients must be between 1 and 100, got 101"},
		{"no time", func(s *Spec) { s.TimeLimit = 0 }, "--time-limit must be between 1ms and 24h"},
		{"too much time", func(s *Spec) { s.TimeLimit = Duration(25 * time.Hour) }, "--time-limit must be between 1ms and 24h, got 25h0m0s"},
		{"negative work", func(s *Spec) { s.Work = Duration(-1) }, "--work must be between 0s and 24h"},
		{"negative pause", func(s *Spec) { s.Pause = Duration(-time.Second) }, "--pause must be between 0s and 24h"},
		{"huge pause", func(s *Spec) { s.Pause = Duration(math.MaxInt64) }, "--pause must be between 0s and 24h"},
		{"zero interval", func(s *Spec) { s.Interval = 0 }, "--interval must be between 1ms and 24h"},
		{"huge interval", func(s *Spec) { s.Interval = Duration(math.MaxInt64) }, "--interval must be between 1ms and 24h"},
		{"negative clock offset", func(s *Spec) { s.ClockOffset = Duration(-time.Second) }, "--clock-offset must be between 0s and 24h"},
		{"huge clock offset", func(s *Spec) { s.ClockOffset = Duration(48 * time.Hour) }, "--clock-offset must be between 0s and 24h"},
		{"zero clock rate", func(s *Spec) { s.ClockRate = 0 }, "--clock-rate must be a number above 0 and at most 100, got 0"},
		{"NaN clock rate", func(s *Spec) { s.ClockRate = math.NaN() }, "--clock-rate must be a number above 0 and at most 100, got NaN"},
		{"infinite clock rate", func(s *Spec) { s.ClockRate = math.Inf(1) }, "got +Inf"},
		{"minus infinite clock rate", func(s *Spec) { s.ClockRate = math.Inf(-1) }, "got -Inf"},
		{"fast clock rate", func(s *Spec) { s.ClockRate = 101 }, "--clock-rate must be a number above 0 and at most 100"},
		{"negative rate", func(s *Spec) { s.Rate = -1 }, "--rate must be 0 (as fast as possible) or lock cycles per second between 0.001 and 1000000, got -1"},
		{"NaN rate", func(s *Spec) { s.Rate = math.NaN() }, "--rate must be 0 (as fast as possible) or lock cycles per second"},
		{"rate of one cycle a century", func(s *Spec) { s.Rate = 1e-9 }, "got 1e-09"},
		{"infinite rate", func(s *Spec) { s.Rate = math.Inf(1) }, "got +Inf"},
		{"negative retry", func(s *Spec) { s.Retry = Duration(-time.Millisecond) }, "--retry must be between 0s and 1m, got -1ms"},
		{"huge retry", func(s *Spec) { s.Retry = Duration(time.Hour) }, "--retry must be between 0s and 1m"},
		{"empty key", func(s *Spec) { s.Key = "" }, "--key must be a non-empty word"},
		{"key with slash", func(s *Spec) { s.Key = "a/b" }, "--key must be a non-empty word"},
		{"key with escape", func(s *Spec) { s.Key = "lock\x1b[2J" }, `got "lock\x1b[2J"`},
		{"key with newline", func(s *Spec) { s.Key = "lo\nck" }, "--key must be a non-empty word"},
		{"key with bidi override", func(s *Spec) { s.Key = "lock\u202e" }, "--key must be a non-empty word"},
		{"key not UTF-8", func(s *Spec) { s.Key = "lock\xff" }, "--key must be a non-empty word"},
		{"even redlock", func(s *Spec) { s.System, s.Nodes = "redlock", 4 }, "redlock: 4 nodes (want an odd number"},
		{"two redis", func(s *Spec) { s.Nodes = 2 }, "redis: 2 nodes (it has 1)"},
		{"kleppmann on redis", func(s *Spec) { s.Nemesis = []string{"kleppmann-clock"} }, "needs --system redlock"},
		{"leader of redis", func(s *Spec) { s.Nemesis = []string{"partition-leader"} }, "has no leader to isolate"},
		{"persistence of zookeeper", func(s *Spec) { s.System, s.Persistence = "zookeeper", "none" }, "--persistence applies to systems of Redis servers (redis, redlock, sentinel), not zookeeper"},
		{"unknown persistence", func(s *Spec) { s.Persistence = "disk" }, `--persistence must be none, aof-everysec or aof-always, got "disk"`},
		{"replicas of redis", func(s *Spec) { s.MinReplicas = 1 }, "--min-replicas-to-write needs a primary with replicas (sentinel), not redis"},
		{"more replicas than there are", func(s *Spec) { s.System, s.MinReplicas = "sentinel", 3 }, "--min-replicas-to-write must be between 0 and 2 (the replicas of 3 nodes), got 3"},
		{"negative replicas", func(s *Spec) { s.System, s.MinReplicas = "sentinel", -1 }, "--min-replicas-to-write must be between 0 and 2"},
		{"lag without replicas", func(s *Spec) { s.System, s.MinReplicasMaxLag = "sentinel", Duration(time.Second) }, "--min-replicas-max-lag applies only with --min-replicas-to-write"},
		{"lag in milliseconds", func(s *Spec) {
			s.System, s.MinReplicas, s.MinReplicasMaxLag = "sentinel", 1, Duration(1500*time.Millisecond)
		}, "--min-replicas-max-lag must be whole seconds"},
		{"restart without kills", func(s *Spec) { s.RestartAfter = Duration(time.Second) }, "--restart-after and --restart-delay-ttl apply to nemeses that kill nodes"},
		{"delayed restart without kills", func(s *Spec) { s.RestartDelayTTL = true }, "apply to nemeses that kill nodes"},
		{"negative restart", func(s *Spec) { s.Nemesis, s.RestartAfter = []string{"kill-node"}, Duration(-time.Second) }, "--restart-after must be between 0s and 24h"},
		{"kill the harness", func(s *Spec) { s.System, s.Nemesis = "local", []string{"kill-node"} }, "served by the harness itself"},
		{"undirected without a target", func(s *Spec) { s.Nemesis, s.Undirected = []string{"pause-node"}, true },
			"--undirected applies to the nemeses that target a hazard (clock, clock-bump"},
		{"failover of redis", func(s *Spec) { s.Nemesis = []string{"failover"} }, "(try --system sentinel)"},
		{"a single client cut in the harness", func(s *Spec) { s.System, s.Nemesis = "local", []string{"delay"} }, "share the harness's"},
		{"bad test name", func(s *Spec) { s.Test = "../x" }, "--test \"../x\" cannot be a directory name"},
		{"test with carriage return", func(s *Spec) { s.Test = "ok\rEVIL" }, `--test must be printable text, got "ok\rEVIL"`},
		{"test with escape", func(s *Spec) { s.Test = "t\x1b]0;pwned\a" }, "--test must be printable text"},
		{"test too long", func(s *Spec) { s.Test = strings.Repeat("t", 256) }, "test name must be at most 255 bytes"},
		{"a pooler in front of redis", func(s *Spec) { s.Pooler = "pgbouncer-transaction" },
			"--pooler applies to postgres, not redis, which has no pooler in front of it"},
		{"a pooler in the harness", func(s *Spec) { s.System, s.Pooler = "local", "pgbouncer-session" }, "--pooler applies to postgres, not local"},
		{"an unknown pooler", func(s *Spec) { s.System, s.Nemesis, s.Pooler = "postgres", nil, "pgbouncer-statement" },
			`--pooler must be pgbouncer-session or pgbouncer-transaction, got "pgbouncer-statement"`},
		{"a pooler's mode alone", func(s *Spec) { s.System, s.Nemesis, s.Pooler = "postgres", nil, "transaction" },
			`--pooler must be pgbouncer-session or pgbouncer-transaction, got "transaction"`},
		{"exec without a program", func(s *Spec) { s.Client = "exec" }, "--client exec needs --client-cmd"},
		{"a program for a Go client", func(s *Spec) { s.Client, s.ClientCmd = "redis", []string{"python3", "x.py"} }, `--client-cmd is the program of --client exec, not of "redis"`},
		{"a program that is not there", func(s *Spec) { s.ClientCmd = []string{"/nonexistent/mylock"} }, `--client-cmd: exec: "/nonexistent/mylock"`},
		{"a program without a name", func(s *Spec) { s.ClientCmd = []string{"", "x.py"} }, "--client-cmd must start with a program"},
		{"a program with a NUL", func(s *Spec) { s.ClientCmd = []string{"sh", "-c", "a\x00b"} }, "hold no NUL byte"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Default()
			c.change(&s)
			err := s.Normalize()
			var se *Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a Error containing %q", err, c.want)
			}
		})
	}
}

// The largest values allowed pass, and twice the TTL (the default pause) does not overflow.
func TestNormalizeAcceptsTheCaps(t *testing.T) {
	s := Default()
	s.Clients, s.ClockRate, s.Rate, s.Retry = 100, 100, 1_000_000, Duration(time.Minute)
	s.TTL, s.TimeLimit = Duration(time.Hour), Duration(24*time.Hour)
	s.Work, s.Interval, s.ClockOffset = Duration(24*time.Hour), Duration(24*time.Hour), Duration(24*time.Hour)
	s.Test = strings.Repeat("t", 255)
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	if s.PauseLength() != 2*time.Hour || s.ClockSkew() != 24*time.Hour || s.CyclePeriod() != time.Microsecond {
		t.Fatalf("pause %s clock skew %s cycle period %s", s.PauseLength(), s.ClockSkew(), s.CyclePeriod())
	}
}

// The default load is the one every run had before it was a setting: a cycle every 50 ms,
// an attempt every 20 ms while the lock is busy; rate 0 and the slowest rate are periods
// too.
func TestCyclePeriod(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want time.Duration
	}{{DefaultRate, 50 * time.Millisecond}, {0, 0}, {0.001, 1000 * time.Second}, {3, 333333333}} {
		s := Default()
		s.Rate = tt.rate
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		if got := s.CyclePeriod(); got != tt.want {
			t.Errorf("rate %g: period %s, want %s", tt.rate, got, tt.want)
		}
	}
	if s := Default(); s.Retry.Std() != 20*time.Millisecond {
		t.Errorf("default retry %s, want 20ms", s.Retry.Std())
	}
}

// A program makes the client exec, and names the test: two programs' runs land apart.
func TestNormalizeNamesExecClientsByTheirProgram(t *testing.T) {
	for _, tt := range []struct {
		cmd  []string
		test string
	}{
		{[]string{"sh", "examples/python/redispy_lock.py"}, "redis-exec-redispy_lock-pause-holder-nofence"},
		{[]string{"sh", "-u", "kazoo lock.py", "--verbose"}, "redis-exec-kazoo_lock-pause-holder-nofence"},
		{[]string{"sh"}, "redis-exec-sh-pause-holder-nofence"},
		{[]string{"sh", "../../" + strings.Repeat("x", 60)}, "redis-exec-" + strings.Repeat("x", 40) + "-pause-holder-nofence"},
	} {
		s := Default()
		s.ClientCmd = tt.cmd
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		if s.Client != "exec" || s.Test != tt.test {
			t.Errorf("%q: client %q test %q, want exec and %q", tt.cmd, s.Client, s.Test, tt.test)
		}
	}
}

func TestNormalizeFillsDefaults(t *testing.T) {
	s := Default()
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	if s.Client != "redis" || s.Test != "redis-redis-pause-holder-nofence" {
		t.Fatalf("client %q test %q", s.Client, s.Test)
	}
	if s.PauseLength() != 2*s.TTL.Std() {
		t.Fatalf("default pause %s, want twice the ttl", s.PauseLength())
	}
}

// Crash settings take their defaults where they apply, and only there.
func TestNormalizeFillsCrashSettings(t *testing.T) {
	tests := []struct {
		name                 string
		change               func(*Spec)
		persistence          string
		maxLag, restartAfter time.Duration
	}{
		{"redis keeps nothing, a killed node is back at once", func(*Spec) {}, "none", 0, 0},
		{"zookeeper is not asked", func(s *Spec) { s.System = "zookeeper" }, "", 0, 0},
		{"min replicas take Redis's lag", func(s *Spec) { s.System, s.MinReplicas = "sentinel", 1 }, "none", 10 * time.Second, 0},
		{"a restart delayed to a ttl by default", func(s *Spec) { s.Nemesis, s.RestartDelayTTL = []string{"kill-node"}, true }, "none", 0, 2 * time.Second},
		{"a chosen restart", func(s *Spec) { s.Nemesis, s.RestartAfter = []string{"kill-node"}, Duration(300*time.Millisecond) }, "none", 0, 300 * time.Millisecond},
		{"a restart delayed to a ttl", func(s *Spec) {
			s.Nemesis, s.RestartAfter, s.RestartDelayTTL = []string{"kill-node"}, Duration(300*time.Millisecond), true
		}, "none", 0, 2 * time.Second},
		{"a restart longer than a ttl", func(s *Spec) {
			s.Nemesis, s.RestartAfter, s.RestartDelayTTL = []string{"kill-node"}, Duration(5*time.Second), true
		}, "none", 0, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalized(t, tt.change)
			if s.Persistence != tt.persistence || s.MinReplicasMaxLag.Std() != tt.maxLag || s.RestartDelay() != tt.restartAfter {
				t.Errorf("persistence %q, max lag %s, restart after %s; want %q, %s, %s",
					s.Persistence, s.MinReplicasMaxLag.Std(), s.RestartDelay(), tt.persistence, tt.maxLag, tt.restartAfter)
			}
		})
	}
}

// normalized is run's defaults changed by change, normalized.
func normalized(t *testing.T, change func(*Spec)) Spec {
	t.Helper()
	s := Default()
	change(&s)
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s
}
