package spec

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// What is wrong on its face is refused with nothing looked up; what needs the systems,
// clients and nemeses is the harness's (harness's TestCheckSpecRefusesWhatDoesNotFit).
func TestValidateRejectsBadSpecs(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
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
		{"a delay longer than the run", func(s *Spec) { s.Nemesis, s.Pause = []string{"delay"}, Duration(time.Minute) },
			"--pause must be at most --time-limit (30s): a fault of 1m0s would outlast the run"},
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
		{"negative replicas", func(s *Spec) { s.System, s.MinReplicas = "sentinel", -1 }, "--min-replicas-to-write must be 0 or more, got -1"},
		{"lag without replicas", func(s *Spec) { s.System, s.MinReplicasMaxLag = "sentinel", Duration(time.Second) }, "--min-replicas-max-lag applies only with --min-replicas-to-write"},
		{"lag in milliseconds", func(s *Spec) {
			s.System, s.MinReplicas, s.MinReplicasMaxLag = "sentinel", 1, Duration(1500*time.Millisecond)
		}, "--min-replicas-max-lag must be whole seconds"},
		{"extend every TTL", func(s *Spec) { s.ExtendEvery = s.TTL }, "--extend-every must be 0 (holders do not extend) or at least 1ms and under --ttl (2s)"},
		{"negative restart", func(s *Spec) { s.Nemesis, s.RestartAfter = []string{"kill-node"}, Duration(-time.Second) }, "--restart-after must be between 0s and 24h"},
		{"an unknown machine clock", func(s *Spec) { s.NodesFile, s.MachineClock = "m.txt", "ntp" }, `--machine-clock is faketime or system, got "ntp"`},
		{"a system clock without machines", func(s *Spec) { s.MachineClock = MachineSystemClock }, "--machine-clock system moves machines' clocks: it needs --nodes-file"},
		{"bad test name", func(s *Spec) { s.Test = "../x" }, "--test \"../x\" cannot be a directory name"},
		{"test with carriage return", func(s *Spec) { s.Test = "ok\rEVIL" }, `--test must be printable text, got "ok\rEVIL"`},
		{"test with escape", func(s *Spec) { s.Test = "t\x1b]0;pwned\a" }, "--test must be printable text"},
		{"test too long", func(s *Spec) { s.Test = strings.Repeat("t", 256) }, "test name must be at most 255 bytes"},
		{"exec without a program", func(s *Spec) { s.Client = "exec" }, "--client exec needs --client-cmd"},
		{"a program for a Go client", func(s *Spec) { s.Client, s.ClientCmd = "redis", []string{"python3", "x.py"} }, `--client-cmd is the program of --client exec, not of "redis"`},
		{"a program for Go clients", func(s *Spec) { s.Client, s.ClientCmd = "redis,redislock", []string{"python3", "x.py"} }, `--client-cmd is the program of --client exec, not of "redis,redislock"`},
		{"an exec client among others without its program", func(s *Spec) { s.Client = "redis,exec" }, "--client exec needs --client-cmd"},
		{"a client twice", func(s *Spec) { s.Client = "redis,redis" }, `--client "redis,redis": each client once, comma-separated, no empty name`},
		{"an empty client in a list", func(s *Spec) { s.Client = "redis,,redislock" }, "each client once, comma-separated, no empty name"},
		{"a program without a name", func(s *Spec) { s.ClientCmd = []string{"", "x.py"} }, "--client-cmd must start with a program"},
		{"a program with a NUL", func(s *Spec) { s.ClientCmd = []string{"sh", "-c", "a\x00b"} }, "hold no NUL byte"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Default()
			c.change(&s)
			err := s.Validate()
			var se *Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a Error containing %q", err, c.want)
			}
		})
	}
}

// The largest values allowed pass, and twice the TTL (the default pause) does not overflow.
func TestValidateAcceptsTheCaps(t *testing.T) {
	s := Default()
	s.Clients, s.ClockRate, s.Rate, s.Retry = 100, 100, 1_000_000, Duration(time.Minute)
	s.TTL, s.TimeLimit = Duration(time.Hour), Duration(24*time.Hour)
	s.Work, s.Interval, s.ClockOffset = Duration(24*time.Hour), Duration(24*time.Hour), Duration(24*time.Hour)
	s.Test = strings.Repeat("t", 255)
	if err := s.Validate(); err != nil {
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
		if err := s.Validate(); err != nil {
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

// An exec client's test is named by its program too: two programs' runs land apart.
func TestDerivedTestNamesExecClientsByTheirProgram(t *testing.T) {
	for _, tt := range []struct {
		cmd  []string
		test string
	}{
		{[]string{"sh", "examples/python/redispy_lock.py"}, "redis-exec-redispy_lock-pause-holder-nofence"},
		{[]string{"sh", "-u", "kazoo lock.py", "--verbose"}, "redis-exec-kazoo_lock-pause-holder-nofence"},
		{[]string{"sh"}, "redis-exec-sh-pause-holder-nofence"},
		{[]string{"examples/known-bugs/redsync_lock", "v4.0.3"}, "redis-exec-v4.0.3-pause-holder-nofence"},
		{[]string{"sh", "../../" + strings.Repeat("x", 60)}, "redis-exec-" + strings.Repeat("x", 40) + "-pause-holder-nofence"},
	} {
		s := Default()
		s.Client, s.ClientCmd = ExecClient, tt.cmd
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := s.DerivedTest(); got != tt.test {
			t.Errorf("%q: test %q, want %q", tt.cmd, got, tt.test)
		}
	}
}

// Clients that share the slots name a test together, each as it would alone.
func TestDerivedTestNamesSharedClientsTogether(t *testing.T) {
	s := Default()
	s.Client, s.ClientCmd = "redis,exec,redislock", []string{"python3", "redispy_lock.py"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := s.DerivedTest(), "redis-redis+exec-redispy_lock+redislock-pause-holder-nofence"; got != want {
		t.Errorf("test %q, want %q", got, want)
	}
	if !s.Mixed() || len(s.ClientNames()) != 3 {
		t.Errorf("clients %q: want three, mixed", s.ClientNames())
	}
}

// A spec with a client left empty and a program is an exec client's: Validate holds it to
// the rules of one.
func TestValidateTakesAProgramForAnExecClient(t *testing.T) {
	s := Default()
	s.ClientCmd = []string{"sh", "lock.sh"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.ClientCmd = []string{"", "lock.sh"}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "--client-cmd must start with a program") {
		t.Fatalf("got %v, want the nameless program refused", err)
	}
}
