// Package spec is a test as plain data: the Spec a run is made from and saved as
// (spec.json), its defaults, what can be said of it with nothing looked up (Validate) and
// the command that runs it again (ReproduceCommand). It imports nothing that runs or
// registers anything: no lock client, nemesis, system or system file, container or
// harness (analysis's TestSpecIsData), so a saved run is judged from its spec (package
// analysis, lockbreaker check) without them. Whether what a spec names exists here and
// fits together, and the defaults that follow from it, is asked once, by the harness
// (harness.CheckSpec).
package spec

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// Spec is a test, as plain data: everything needed to run it again.
type Spec struct {
	// Test names the results directory; derived from the rest when empty.
	Test   string `json:"test"`
	System string `json:"system"`
	// Client is the lock client, or several comma-separated ("kazoo,curator") that share
	// the slots in turn, all on one lock (ClientNames); empty: the system's own.
	Client string `json:"client"`
	// ClientCmd is the program an exec client runs, one per lock client: its command
	// line, words as given to exec (execlock, docs/protocol.md).
	ClientCmd []string `json:"client_cmd,omitempty"`
	Nemesis   []string `json:"nemesis"`
	Fencing   bool     `json:"fencing"`
	Clients   int      `json:"clients"`
	// Nodes is the cluster size; 0 means the system's usual size.
	Nodes     int      `json:"nodes,omitempty"`
	TTL       Duration `json:"ttl"`
	TimeLimit Duration `json:"time_limit"`
	Seed      int64    `json:"seed"`
	// Work is how long a holder thinks between reading and writing the register.
	Work Duration `json:"work"`
	// ExtendEvery, when not 0, makes every holder extend its lease after each ExtendEvery of
	// its work and once more just before it writes; a holder whose extend does not succeed
	// does not write. It is under the TTL, which each extend renews.
	ExtendEvery Duration `json:"extend_every,omitempty"`
	// Rate is how many lock cycles (acquire, read, write, release) per second each client
	// aims at: a cycle starts 1/Rate after the one before, or right after it when it took
	// longer, but never sooner than Retry after it. 0 runs cycles back to back, as fast as
	// the lock and the storage answer.
	Rate float64 `json:"rate"`
	// Retry is the pause between acquire attempts while the lock is busy.
	Retry Duration `json:"retry"`
	// Pause is how long a fault lasts: a paused process or node stays stopped, a cut, a
	// clock fault or a delay holds (a failover waits for a grant to lose at least this
	// long); 0 means twice the TTL.
	Pause Duration `json:"pause,omitempty"`
	// LinkNode narrows the faults on the clients' links to each client's link to that node
	// ("n2"); "" strikes every link. LinkAnswers makes them strike what comes back instead
	// of what the client sends.
	LinkNode    string `json:"link_node,omitempty"`
	LinkAnswers bool   `json:"link_answers,omitempty"`
	// Interval is the mean time between scheduled faults.
	Interval Duration `json:"interval"`
	// ClockOffset is how far clock faults move a clock; 0 means twice the TTL.
	ClockOffset Duration `json:"clock_offset,omitempty"`
	// ClockRate is how many times as fast clock-rate runs a clock.
	ClockRate float64 `json:"clock_rate"`
	Key       string  `json:"key"`
	// Persistence is what the nodes of a system that lets it be chosen (Redis) keep on
	// disk, and so what a node killed and started again remembers: none, aof-everysec or
	// aof-always. harness.CheckSpec makes "" none for those systems.
	Persistence string `json:"persistence,omitempty"`
	// MinReplicas makes a replicated system's primary refuse a write unless that many
	// replicas acknowledged within MinReplicasMaxLag (whole seconds; harness.CheckSpec
	// makes 0 Redis's own default, 10s).
	MinReplicas       int      `json:"min_replicas_to_write,omitempty"`
	MinReplicasMaxLag Duration `json:"min_replicas_max_lag,omitempty"`
	// Pooler puts a connection pooler between every lock client and the nodes, in the
	// mode it names (pgbouncer-session, pgbouncer-transaction: system.Pooler), on the
	// systems that offer one (postgres); "" connects the clients to the servers.
	Pooler string `json:"pooler,omitempty"`
	// RestartAfter is how long a node killed by kill-node or failover stays down; 0 means
	// it is started again at once, as a supervisor would, while the lock it granted is
	// still held.
	RestartAfter Duration `json:"restart_after,omitempty"`
	// RestartDelayTTL keeps a killed node down for at least one TTL, antirez's mitigation:
	// every lease it granted has run out when it serves again.
	RestartDelayTTL bool `json:"restart_delay_ttl,omitempty"`
	// Victims says which nodes a crash of nodes under a held lock strikes
	// (nemesis.Env.Victims): "" or "holder", as many of the holder's nodes as another client
	// needs; "minority", "majority" or "all" of the nodes.
	Victims string `json:"victims,omitempty"`
	// Undirected makes the targeted faults fire on their schedule and hope, as before they
	// were directed (nemesis.Env.Undirected): no victim is kept inside its critical section.
	Undirected bool `json:"undirected,omitempty"`
	// Faults, when not 0, stops the nemesis once that many of its faults have begun, at the
	// first moment after with no fault on (a round under way ends as it would).
	Faults int `json:"faults,omitempty"`
	// Schedule, when set, is when, on whom and for how long the nemeses make their faults
	// (Step), instead of their seeded draws: a hunt's trial, or a run of one again.
	Schedule []Step `json:"schedule,omitempty"`
	// StopEarly ends the run StopGrace after two clients were first seen holding the lock
	// at once, rather than at its time limit; the run is then judged on its whole history.
	StopEarly bool `json:"stop_early,omitempty"`
	// NodesFile, when set, names machines (package machines, docs/machines.md) the nodes
	// run on instead of containers, node i on the i-th; how to log in to them is the
	// harness's, not the spec's (harness.Runner.Login).
	NodesFile string `json:"nodes_file,omitempty"`
	// MachineClock is which clock the faults that move clocks move on machines (NodesFile):
	// MachineFaketime's ("", the default) or MachineSystemClock's.
	MachineClock string `json:"machine_clock,omitempty"`
	// SystemFile, when set, is a system file (package sysfile) describing the lock service;
	// harness.CheckSpec reads it, makes System its name and SystemFileSHA256 the file's
	// hash, which results and the suite matrix show.
	SystemFile       string `json:"system_file,omitempty"`
	SystemFileSHA256 string `json:"system_file_sha256,omitempty"`
}

// The clocks a run on machines can move (Spec.MachineClock).
const (
	// MachineFaketime moves each server's clock, started under libfaketime; the machine's
	// own is left alone.
	MachineFaketime = "faketime"
	// MachineSystemClock moves the machine's system clock, its NTP stopped meanwhile: for
	// dedicated VMs.
	MachineSystemClock = "system"
)

// StopGrace is how long a run that stops early goes on after the first violation it saw:
// long enough for the old holder's write to reach the storage and be answered.
const StopGrace = time.Second

// Duration is a time.Duration written as "2s" in spec files.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"2s\": %s", quote.ShortenAll(string(b)))
	}
	v, err := time.ParseDuration(s)
	if err != nil { // time's own message quotes s whole
		return fmt.Errorf("invalid duration %s (want e.g. \"2s\")", quote.Short(s))
	}
	*d = Duration(v)
	return nil
}

// Std returns the time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Default is Kleppmann's scenario on a single Redis: a holder paused longer than its
// lease, no fencing.
func Default() Spec {
	return Spec{
		System:    "redis",
		Nemesis:   []string{history.PauseHolder.Name},
		Clients:   5,
		TTL:       Duration(2 * time.Second),
		TimeLimit: Duration(30 * time.Second),
		Seed:      7,
		Work:      Duration(100 * time.Millisecond),
		Rate:      DefaultRate,
		Retry:     Duration(DefaultRetry),
		Interval:  Duration(time.Second),
		ClockRate: 2,
		Key:       "lock",
	}
}

// The default load: a cycle every 50 ms and an acquire attempt every 20 ms while the lock
// is busy, as every run had before they were settings.
const (
	DefaultRate  = 20
	DefaultRetry = 20 * time.Millisecond
)

// Error is bad input: the CLI reports it as a usage error.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

func errorf(format string, args ...any) error {
	return &Error{Reason: fmt.Sprintf(format, args...)}
}

// ExecClient is the client that drives a program of the user's over the exec protocol
// (package execlock, docs/protocol.md), named here so that a spec can say which client it
// is without linking the clients; harness's TestExecClientIsExeclocks keeps them one.
const ExecClient = "exec"

// Validate refuses what is wrong with the spec on its face, with nothing looked up:
// numbers and durations out of range, a key or test name no directory, log or terminal
// should take, settings that need others (--min-replicas-max-lag without
// --min-replicas-to-write, --faults with no nemesis, a program for a client other than
// exec). Whether its system, client and nemeses exist here and suit one another, and the
// defaults that depend on them (the client, the test name), are the harness's question
// (harness.CheckSpec, which calls Validate first): answering it links every lock client,
// the nemeses and the system files, which a spec read to judge a saved run never needs.
func (s Spec) Validate() error {
	if s.SystemFile == "" && s.SystemFileSHA256 != "" {
		return errorf("system_file_sha256 without system_file")
	}
	if err := s.checkClientCmd(); err != nil {
		return err
	}
	if err := s.checkBounds(); err != nil {
		return err
	}
	if err := s.checkCrashSettings(); err != nil {
		return err
	}
	if err := s.checkSchedule(); err != nil {
		return err
	}
	switch {
	case s.MachineClock != "" && s.MachineClock != MachineFaketime && s.MachineClock != MachineSystemClock:
		return errorf("--machine-clock is %s or %s, got %s", MachineFaketime, MachineSystemClock, quote.Short(s.MachineClock))
	case s.MachineClock == MachineSystemClock && s.NodesFile == "":
		return errorf("--machine-clock %s moves machines' clocks: it needs --nodes-file", MachineSystemClock)
	}
	if s.Test == "" {
		return nil
	}
	switch {
	case !printable(s.Test):
		return errorf("--test must be printable text, got %s", quote.Short(s.Test))
	case len(s.Test) > maxTestName:
		return errorf("test name must be at most %d bytes (it names a directory; give a shorter --test), got %d", maxTestName, len(s.Test))
	case strings.ContainsAny(s.Test, "/\\") || strings.HasPrefix(s.Test, "."):
		return errorf("--test %s cannot be a directory name", quote.Short(s.Test))
	}
	return nil
}

// Caps on the spec. They keep arithmetic on durations (twice the TTL, sums of timeouts)
// far from overflow and refuse values that would only make a run hang or explode.
const (
	maxClients   = 100 // each client is an OS process with its own connections
	maxTTL       = time.Hour
	maxSpan      = 24 * time.Hour // time limit, pause, interval, work, clock offset
	maxClockRate = 100
	// Lock cycles per second per client, besides 0: from one cycle in a thousand seconds
	// to far beyond any lock's round trip.
	minRate, maxRate = 0.001, 1_000_000
	maxRetry         = time.Minute
	maxFaults        = 1_000_000
	// maxTestName is what most file systems allow in one directory name.
	maxTestName = 255
)

// checkBounds refuses numbers out of range and keys no lock service could use.
func (s Spec) checkBounds() error {
	if s.Clients < 1 || s.Clients > maxClients {
		return errorf("--clients must be between 1 and %d, got %d", maxClients, s.Clients)
	}
	for _, b := range []struct {
		flag     string
		d        Duration
		min, max time.Duration
	}{
		// Redis counts leases in whole milliseconds.
		{"ttl", s.TTL, time.Millisecond, maxTTL},
		{"time-limit", s.TimeLimit, time.Millisecond, maxSpan},
		{"work", s.Work, 0, maxSpan},
		{"pause", s.Pause, 0, maxSpan},
		{"interval", s.Interval, time.Millisecond, maxSpan},
		{"clock-offset", s.ClockOffset, 0, maxSpan},
		{"retry", s.Retry, 0, maxRetry},
	} {
		if d := b.d.Std(); d < b.min || d > b.max {
			return errorf("--%s must be between %s and %s, got %s", b.flag, short(b.min), short(b.max), d)
		}
	}
	if _, err := s.LinkNodeIndex(); err != nil {
		return err
	}
	if e := s.ExtendEvery.Std(); e != 0 && (e < time.Millisecond || e >= s.TTL.Std()) {
		return errorf("--extend-every must be 0 (holders do not extend) or at least 1ms and under --ttl (%s), which each extend renews, got %s", s.TTL.Std(), e)
	}
	// A fault of a set length that outlasts the run could never be seen to end in it.
	if s.Pause > s.TimeLimit {
		return errorf("--pause must be at most --time-limit (%s): a fault of %s would outlast the run", s.TimeLimit.Std(), s.Pause.Std())
	}
	// NaN fails every comparison, so test for the valid range, not the invalid one.
	if !(s.ClockRate > 0 && s.ClockRate <= maxClockRate) {
		return errorf("--clock-rate must be a number above 0 and at most %d, got %g", maxClockRate, s.ClockRate)
	}
	if !(s.Rate == 0 || s.Rate >= minRate && s.Rate <= maxRate) {
		return errorf("--rate must be 0 (as fast as possible) or lock cycles per second between %g and %d, got %g", minRate, maxRate, s.Rate)
	}
	if s.Key == "" || strings.ContainsAny(s.Key, " /\\") || !printable(s.Key) {
		return errorf("--key must be a non-empty word of printable characters, without / or \\, got %s", quote.Short(s.Key))
	}
	return nil
}

// ClientNames are the lock clients that share the slots, in turn: slot i runs the
// (i mod n)th; one name, or none when the spec leaves it to the system.
func (s Spec) ClientNames() []string {
	if s.Client == "" {
		return nil
	}
	return strings.Split(s.Client, ",")
}

// Mixed says whether several lock clients share the slots.
func (s Spec) Mixed() bool { return len(s.ClientNames()) > 1 }

// checkClientCmd refuses a client list with an empty or repeated name, a program for a
// client that runs none, an exec client without one, and a program with no name or a NUL
// byte. A client left empty with a program is exec. Whether the program can be started
// here is the harness's question.
func (s Spec) checkClientCmd() error {
	names := s.ClientNames()
	for i, name := range names {
		if name == "" || slices.Contains(names[:i], name) {
			return errorf("--client %s: each client once, comma-separated, no empty name", quote.Short(s.Client))
		}
	}
	exec := slices.Contains(names, ExecClient) || s.Client == "" && len(s.ClientCmd) > 0
	switch {
	case exec && len(s.ClientCmd) == 0:
		return errorf("--client exec needs --client-cmd, the program each lock client runs (docs/protocol.md)")
	case !exec && len(s.ClientCmd) > 0:
		return errorf("--client-cmd is the program of --client exec, not of %s", quote.Short(s.Client))
	case exec && (s.ClientCmd[0] == "" || slices.ContainsFunc(s.ClientCmd, func(w string) bool { return strings.ContainsRune(w, 0) })):
		return errorf("--client-cmd must start with a program and hold no NUL byte, got %s", quote.Short(strings.Join(s.ClientCmd, " ")))
	}
	return nil
}

// checkCrashSettings refuses the bounds of the crash settings, and the settings that need
// another: a lag without min replicas, a bound on the faults of no nemesis. Which systems
// and nemeses they apply to is the harness's question.
func (s Spec) checkCrashSettings() error {
	switch lag := s.MinReplicasMaxLag.Std(); {
	case s.MinReplicas < 0:
		return errorf("--min-replicas-to-write must be 0 or more, got %d", s.MinReplicas)
	case lag != 0 && s.MinReplicas == 0:
		return errorf("--min-replicas-max-lag applies only with --min-replicas-to-write")
	case lag < 0 || lag > maxTTL || lag%time.Second != 0:
		return errorf("--min-replicas-max-lag must be whole seconds between 1s and 1h (Redis counts it in seconds), got %s", lag)
	}
	if s.Faults < 0 || s.Faults > maxFaults {
		return errorf("--faults must be between 0 (no bound) and %d, got %d", maxFaults, s.Faults)
	}
	if s.Faults > 0 && !history.Injecting(s.Nemesis) {
		return errorf("--faults bounds the nemesis's faults, and nemesis none injects none")
	}
	if d := s.RestartAfter.Std(); d < 0 || d > maxSpan {
		return errorf("--restart-after must be between 0s and %s, got %s", short(maxSpan), d)
	}
	if s.Victims != "" && !slices.Contains(Victims, s.Victims) {
		return errorf("--victims must be %s, got %s", strings.Join(Victims, ", "), quote.Short(s.Victims))
	}
	return nil
}

// Victims are the choices of Spec.Victims, the default first.
var Victims = []string{"holder", "minority", "majority", "all"}

// printable reports whether s is valid UTF-8 with no control or other non-printing runes:
// names end up in paths, logs and terminals.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// short writes a bound as a person would: 1h, not 1h0m0s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// DerivedTest is the test name a spec without one is given: its system, pooler, client,
// nemeses and fencing ("redis-redis-pause-holder-nofence").
func (s Spec) DerivedTest() string {
	faults := history.NemesisText(s.Nemesis, "+")
	fencing := "nofence"
	if s.Fencing {
		fencing = "fenced"
	}
	if s.Pooler != "" {
		return fmt.Sprintf("%s-%s-%s-%s-%s", s.System, s.Pooler, s.clientName(), faults, fencing)
	}
	return fmt.Sprintf("%s-%s-%s-%s", s.System, s.clientName(), faults, fencing)
}

// clientName names the clients in a test name, joined by "+": an exec client by its
// program too, the base name of the last word that is not a flag (exec-redispy_lock), so
// two programs' runs land apart.
func (s Spec) clientName() string {
	names := s.ClientNames()
	for i, name := range names {
		if name == ExecClient {
			names[i] = s.execName()
		}
	}
	return strings.Join(names, "+")
}

// execName is the exec client's name in a test name, with its program's.
func (s Spec) execName() string {
	program := ""
	for _, w := range slices.Backward(s.ClientCmd) {
		if !strings.HasPrefix(w, "-") {
			program = filepath.Base(w)
			if ext := filepath.Ext(program); strings.ContainsFunc(ext, unicode.IsLetter) { // lock.py, not v4.0.3
				program = strings.TrimSuffix(program, ext)
			}
			break
		}
	}
	program = strings.Map(func(r rune) rune {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.') {
			return r
		}
		return '_'
	}, program)
	if len(program) > maxProgramName {
		program = program[:maxProgramName]
	}
	return ExecClient + "-" + strings.Trim(program, ".")
}

// maxProgramName bounds a program's part of a test name.
const maxProgramName = 40

// PauseLength is how long pauses last.
func (s Spec) PauseLength() time.Duration {
	if s.Pause == 0 {
		return 2 * s.TTL.Std()
	}
	return s.Pause.Std()
}

// LinkNodeIndex is LinkNode's index, 1 for n1, or 0 when it is "".
func (s Spec) LinkNodeIndex() (int, error) {
	if s.LinkNode == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s.LinkNode, "n"))
	if err != nil || n < 1 || !strings.HasPrefix(s.LinkNode, "n") || s.LinkNode != "n"+strconv.Itoa(n) {
		return 0, errorf("--link-node must name a node as n1, n2..., got %s", quote.Short(s.LinkNode))
	}
	return n, nil
}

// RestartDelay is how long a killed node stays down: RestartAfter (none when 0), and at
// least the TTL with RestartDelayTTL.
func (s Spec) RestartDelay() time.Duration {
	d := s.RestartAfter.Std()
	if s.RestartDelayTTL {
		d = max(d, s.TTL.Std())
	}
	return d
}

// ReplicaLag is how old its replicas' acknowledgements may be before a replicated primary
// refuses writes; 0 when it never refuses (no --min-replicas-to-write).
func (s Spec) ReplicaLag() time.Duration {
	if s.MinReplicas == 0 {
		return 0
	}
	return s.MinReplicasMaxLag.Std()
}

// CyclePeriod is from one lock cycle's start to the next's: one over the rate, 0 for as
// fast as possible.
func (s Spec) CyclePeriod() time.Duration {
	if s.Rate == 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / s.Rate)
}

// ClockSkew is how far clock faults move a clock.
func (s Spec) ClockSkew() time.Duration {
	if s.ClockOffset == 0 {
		return 2 * s.TTL.Std()
	}
	return s.ClockOffset.Std()
}
