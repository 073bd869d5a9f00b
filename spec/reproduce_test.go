package spec

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
)

func TestReproduceCommand(t *testing.T) {
	local := Default()
	local.System, local.Client, local.Nemesis, local.TTL = "local", "local", []string{"pause-holder", "kill-client"}, Duration(500*time.Millisecond)
	tests := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"every setting, derived ones left out", func(*Spec) {},
			"lockbreaker run --system local --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
				"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock"},
		{"set derived ones are kept", func(s *Spec) {
			s.Nodes, s.Pause, s.ClockOffset, s.Fencing, s.Nemesis = 5, Duration(3*time.Second), Duration(time.Minute), true, nil
		}, "lockbreaker run --system local --client local --nemesis none --fencing on --clients 5 --nodes 5 " +
			"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --pause 3s --clock-offset 1m0s --interval 1s --clock-rate 2 --key lock"},
		{"crash settings are kept when set", func(s *Spec) {
			s.Persistence, s.MinReplicas, s.MinReplicasMaxLag = "aof-always", 1, Duration(2*time.Second)
			s.RestartAfter, s.RestartDelayTTL = Duration(300*time.Millisecond), true
		}, "lockbreaker run --system local --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
			"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock " +
			"--persistence aof-always --min-replicas-to-write 1 --min-replicas-max-lag 2s --restart-after 300ms --restart-delay-ttl"},
		{"a pooler is kept when set", func(s *Spec) {
			s.System, s.Client, s.Nemesis, s.Pooler = "postgres", "pg-advisory", nil, "pgbouncer-transaction"
		}, "lockbreaker run --system postgres --client pg-advisory --nemesis none --fencing off --clients 5 " +
			"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock " +
			"--pooler pgbouncer-transaction"},
		{"the derived test name is left out", func(s *Spec) { s.Test = s.DerivedTest() },
			"lockbreaker run --system local --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
				"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock"},
		{"extends are kept when set", func(s *Spec) { s.ExtendEvery = Duration(150 * time.Millisecond) },
			"lockbreaker run --system local --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
				"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --extend-every 150ms --interval 1s --clock-rate 2 --key lock"},
		{"one link's answers are kept when set", func(s *Spec) { s.LinkNode, s.LinkAnswers = "n2", true },
			"lockbreaker run --system local --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
				"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock --link-node n2 --link-answers"},
		{"load is kept", func(s *Spec) { s.Rate, s.Retry = 0, Duration(time.Millisecond) },
			"lockbreaker run --system local --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
				"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 0 --retry 1ms --interval 1s --clock-rate 2 --key lock"},
		{"an exec client's program is one word", func(s *Spec) {
			s.Client, s.ClientCmd = "exec", []string{"python3", "examples/python/redispy_lock.py"}
		}, "lockbreaker run --system local --client exec --client-cmd 'python3 examples/python/redispy_lock.py' " +
			"--nemesis pause-holder,kill-client --fencing off --clients 5 " +
			"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock"},
		{"a system file stands for the system", func(s *Spec) {
			s.System, s.SystemFile, s.SystemFileSHA256 = "mine", "own/mine.yaml", "ab12"
		}, "lockbreaker run --system-file own/mine.yaml --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
			"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock"},
		{"a test name is quoted for the shell", func(s *Spec) { s.Test, s.ClockRate = `it's $(rm -rf ~)`, 1.5 },
			"lockbreaker run --system local --client local --nemesis pause-holder,kill-client --fencing off --clients 5 " +
				"--ttl 500ms --time-limit 30s --seed 7 --work 100ms --rate 20 --retry 20ms --interval 1s --clock-rate 1.5 --key lock --test 'it'\\''s $(rm -rf ~)'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := local
			tt.change(&s)
			spec, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := ReproduceCommand(spec); got != tt.want {
				t.Errorf("command\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	// A run from before the load was a setting had the default load.
	old := `{"system": "local", "client": "local", "nemesis": null, "clients": 2, "ttl": "1s", "time_limit": "5s",` +
		`"seed": 3, "work": "0s", "interval": "1s", "clock_rate": 2, "key": "lock"}`
	want := "lockbreaker run --system local --client local --nemesis none --fencing off --clients 2 " +
		"--ttl 1s --time-limit 5s --seed 3 --work 0s --rate 20 --retry 20ms --interval 1s --clock-rate 2 --key lock"
	if got := ReproduceCommand(json.RawMessage(old)); got != want {
		t.Errorf("command of an old spec\n%s\nwant\n%s", got, want)
	}
	// A program's words come back as they were, however they are quoted: the command is
	// split as a shell splits it, and --client-cmd's value as run splits it.
	s := local
	s.Client, s.ClientCmd = "exec", []string{"python3", "my lock.py", `it's "$HOME"`, ""}
	spec, _ := json.Marshal(s)
	words, err := shellwords.Split(ReproduceCommand(spec))
	if i := slices.Index(words, "--client-cmd"); err != nil || i < 0 {
		t.Errorf("command %q: %v", words, err)
	} else if got, err := shellwords.Split(words[i+1]); err != nil || !slices.Equal(got, s.ClientCmd) {
		t.Errorf("--client-cmd %q reads back as %q, %v; want %q", words[i+1], got, err, s.ClientCmd)
	}
	for _, notASpec := range []string{"", "[]", `{"ttl": 5}`} {
		if got := ReproduceCommand(json.RawMessage(notASpec)); got != "" {
			t.Errorf("ReproduceCommand(%q) = %q, want none", notASpec, got)
		}
	}
}
