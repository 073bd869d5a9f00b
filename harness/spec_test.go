package harness

import (
	"errors"
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
		{"unknown system", func(s *Spec) { s.System = "etcd" }, `unknown system "etcd"`},
		{"unknown client", func(s *Spec) { s.Client = "nope" }, `unknown client "nope"`},
		{"unknown nemesis", func(s *Spec) { s.Nemesis = []string{"pause-holder", "meteor"} }, `unknown nemesis "meteor"`},
		{"zero ttl", func(s *Spec) { s.TTL = 0 }, "ttl must be positive"},
		{"negative ttl", func(s *Spec) { s.TTL = Duration(-time.Second) }, "ttl must be positive"},
		{"no clients", func(s *Spec) { s.Clients = 0 }, "clients must be at least 1"},
		{"no time", func(s *Spec) { s.TimeLimit = 0 }, "time limit must be positive"},
		{"bad key", func(s *Spec) { s.Key = "a/b" }, "key must be a non-empty word"},
		{"even redlock", func(s *Spec) { s.System, s.Nodes = "redlock", 4 }, "redlock: 4 nodes (want an odd number"},
		{"two redis", func(s *Spec) { s.Nodes = 2 }, "a single Redis has 1"},
		{"kleppmann on redis", func(s *Spec) { s.Nemesis = []string{"kleppmann-clock"} }, "needs --system redlock"},
		{"leader of redis", func(s *Spec) { s.Nemesis = []string{"partition-leader"} }, "has no leader to isolate"},
		{"bad test name", func(s *Spec) { s.Test = "../x" }, "cannot be a directory name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := DefaultSpec()
			c.change(&s)
			err := s.Normalize()
			var se *SpecError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a SpecError containing %q", err, c.want)
			}
		})
	}
}

func TestNormalizeFillsDefaults(t *testing.T) {
	s := DefaultSpec()
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
