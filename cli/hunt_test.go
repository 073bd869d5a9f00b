package cli

import (
	"strings"
	"testing"
)

func TestHuntRefusesBadInputInOneLine(t *testing.T) {
	nodocker := []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}
	out := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--budget", "0s"}, "hunt: --budget must be more than 0"},
		{[]string{"--trials", "0"}, "hunt: --trials must be at least 1"},
		{[]string{"--nemesis", "pause-everything"}, "unknown nemesis"},
		{[]string{"--nemesis", "none"}, "hunt: --nemesis names the faults to hunt with"},
		{[]string{"--nemesis", "pause-holder"}, "hunt: nemesis pause-holder draws its own faults, which a hunt cannot steer"},
		{[]string{"--schedule", "pause-client@1s/0/1s"}, "hunt: --schedule is what a hunt writes"},
		{[]string{"--system", "redis", "--nemesis", "delay-extend"}, "needs --extend-every"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := lockbreaker(t, nodocker, append([]string{"hunt", "--results", out}, c.args...)...)
			if code != 254 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, want 254 with one line holding %q\nstdout %s\nstderr %s", code, c.want, stdout, stderr)
			}
		})
	}
}
