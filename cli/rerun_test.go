package cli

import (
	"reflect"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/harness"
	runspec "github.com/lockbreaker/lockbreaker/spec"
)

// The command a report gives to run a test again parses back, through run's own flags, to
// the very spec that ran.
func TestRerunCommandParsesBackToTheSpec(t *testing.T) {
	tests := []struct {
		name   string
		change func(*harness.Spec)
	}{
		{"the default", func(*harness.Spec) {}},
		{"every setting away from its default", func(s *harness.Spec) {
			s.System, s.Client, s.Nemesis, s.Fencing, s.Clients, s.Nodes = "redlock", "redsync", []string{"pause-node", "clock-bump"}, false, 7, 5
			s.TTL, s.TimeLimit, s.Seed, s.Work = harness.Duration(3*time.Second), harness.Duration(time.Minute), -3, harness.Duration(time.Millisecond)
			s.Pause, s.Interval, s.ClockOffset, s.ClockRate = harness.Duration(9*time.Second), harness.Duration(2*time.Second), harness.Duration(time.Hour), 0.25
			s.Key, s.Test = "k2", "mine"
		}},
		{"fencing and no nemesis", func(s *harness.Spec) { s.Fencing, s.Nemesis = true, []string{"none"} }},
		{"a written schedule", func(s *harness.Spec) {
			s.Nemesis = []string{"pause-client", "pause-node"}
			s.Schedule = []runspec.Step{{Fault: "pause-node", At: 0, Target: 2, For: runspec.Duration(time.Second)},
				{Fault: "pause-client", At: runspec.Duration(1234 * time.Millisecond), Target: 14, For: runspec.Duration(2500 * time.Millisecond)}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := harness.DefaultSpec()
			tt.change(&want)
			got := harness.DefaultSpec()
			fs, opts := runFlags(&got, "run")
			if err := command.Parse(fs, want.Args()); err != nil {
				t.Fatalf("run refuses %q: %v", want.Args(), err)
			}
			got, err := specOf(got, opts, "run") // as cmdRun reads them
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q runs\n%+v\nnot\n%+v", want.Args(), got, want)
			}
		})
	}
}
