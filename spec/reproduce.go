package spec

import (
	"encoding/json"
	"strconv"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
)

// Args are the flags of `lockbreaker run` that run this spec again. Every setting is
// written out, defaults included, so that a change of defaults cannot change what the
// command runs; only the settings whose zero means "derived from the TTL or the system"
// (nodes, pause, clock offset, restart after), extend-every when holders do not extend, those that apply to some systems only and
// are unset (persistence, min replicas), and a test name that is the derived one are left
// out when they are just that.
func (s Spec) Args() []string {
	nemesis := history.NemesisText(s.Nemesis, ",")
	fencing := "off"
	if s.Fencing {
		fencing = "on"
	}
	args := []string{"--system", s.System, "--client", s.Client}
	if s.SystemFile != "" {
		args = []string{"--system-file", s.SystemFile, "--client", s.Client}
	}
	if len(s.ClientCmd) > 0 {
		args = append(args, "--client-cmd", shellwords.Join(s.ClientCmd))
	}
	args = append(args, "--nemesis", nemesis, "--fencing", fencing, "--clients", strconv.Itoa(s.Clients))
	if s.Nodes != 0 {
		args = append(args, "--nodes", strconv.Itoa(s.Nodes))
	}
	args = append(args, "--ttl", s.TTL.Std().String(), "--time-limit", s.TimeLimit.Std().String(),
		"--seed", strconv.FormatInt(s.Seed, 10), "--work", s.Work.Std().String(),
		"--rate", strconv.FormatFloat(s.Rate, 'g', -1, 64), "--retry", s.Retry.Std().String())
	for _, optional := range []struct {
		flag string
		d    Duration
	}{{"--extend-every", s.ExtendEvery}, {"--pause", s.Pause}, {"--clock-offset", s.ClockOffset}} {
		if optional.d != 0 {
			args = append(args, optional.flag, optional.d.Std().String())
		}
	}
	args = append(args, "--interval", s.Interval.Std().String(),
		"--clock-rate", strconv.FormatFloat(s.ClockRate, 'g', -1, 64), "--key", s.Key)
	if s.Persistence != "" {
		args = append(args, "--persistence", s.Persistence)
	}
	if s.Pooler != "" {
		args = append(args, "--pooler", s.Pooler)
	}
	if s.MinReplicas != 0 {
		args = append(args, "--min-replicas-to-write", strconv.Itoa(s.MinReplicas), "--min-replicas-max-lag", s.MinReplicasMaxLag.Std().String())
	}
	if s.RestartAfter != 0 {
		args = append(args, "--restart-after", s.RestartAfter.Std().String())
	}
	if s.RestartDelayTTL {
		args = append(args, "--restart-delay-ttl")
	}
	if s.NodesFile != "" {
		args = append(args, "--nodes-file", s.NodesFile)
	}
	if s.MachineClock != "" {
		args = append(args, "--machine-clock", s.MachineClock)
	}
	if s.LinkNode != "" {
		args = append(args, "--link-node", s.LinkNode)
	}
	if s.LinkAnswers {
		args = append(args, "--link-answers")
	}
	if s.Victims != "" {
		args = append(args, "--victims", s.Victims)
	}
	if s.Undirected {
		args = append(args, "--undirected")
	}
	if s.Faults != 0 {
		args = append(args, "--faults", strconv.Itoa(s.Faults))
	}
	if len(s.Schedule) > 0 {
		args = append(args, "--schedule", ScheduleText(s.Schedule))
	}
	if s.StopEarly {
		args = append(args, "--stop-at-first-violation")
	}
	if s.Test != "" && s.Test != s.DerivedTest() {
		args = append(args, "--test", s.Test)
	}
	return args
}

// ReproduceCommand is the shell command that runs a saved spec (spec.json's bytes) again,
// or "" when spec is not one. A setting the spec does not name (rate and retry, in runs
// from before they were settings) is the default, which is what such a run used.
func ReproduceCommand(spec json.RawMessage) string {
	s := Default()
	if len(spec) == 0 || json.Unmarshal(spec, &s) != nil {
		return ""
	}
	return shellwords.Join(append([]string{"lockbreaker", "run"}, s.Args()...))
}
