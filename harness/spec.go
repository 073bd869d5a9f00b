// Package harness runs one test end to end: it turns a Spec into containers, a storage
// service, worker processes and a nemesis, records everything they do into the history,
// heals and tears everything down, and hands the history to the checkers.
//
// Data flows one way: Spec -> cluster -> storage -> workers + nemesis -> history ->
// checkers -> results. Nothing downstream reaches back: the checkers see only the history,
// so Analyze gives the same verdicts on a saved run as the run itself did.
package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// Spec is a test, as plain data: everything needed to run it again.
type Spec struct {
	// Test names the results directory; derived from the rest when empty.
	Test    string   `json:"test"`
	System  string   `json:"system"`
	Client  string   `json:"client"`
	Nemesis []string `json:"nemesis"`
	Fencing bool     `json:"fencing"`
	Clients int      `json:"clients"`
	// Nodes is the cluster size; 0 means the system's usual size.
	Nodes     int      `json:"nodes,omitempty"`
	TTL       Duration `json:"ttl"`
	TimeLimit Duration `json:"time_limit"`
	Seed      int64    `json:"seed"`
	// Work is how long a holder thinks between reading and writing the register.
	Work Duration `json:"work"`
	// Pause is how long a paused process or node stays stopped; 0 means twice the TTL.
	Pause Duration `json:"pause,omitempty"`
	// Interval is the mean time between scheduled faults.
	Interval Duration `json:"interval"`
	// ClockOffset is how far clock faults move a clock; 0 means twice the TTL.
	ClockOffset Duration `json:"clock_offset,omitempty"`
	// ClockRate is how many times as fast clock-rate runs a clock.
	ClockRate float64 `json:"clock_rate"`
	Key       string  `json:"key"`
}

// Duration is a time.Duration written as "2s" in spec files.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"2s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Std returns the time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// DefaultSpec is Kleppmann's scenario on a single Redis: a holder paused longer than its
// lease, no fencing.
func DefaultSpec() Spec {
	return Spec{
		System:    "redis",
		Nemesis:   []string{"pause-holder"},
		Clients:   5,
		TTL:       Duration(2 * time.Second),
		TimeLimit: Duration(30 * time.Second),
		Seed:      7,
		Work:      Duration(100 * time.Millisecond),
		Interval:  Duration(time.Second),
		ClockRate: 2,
		Key:       "lock",
	}
}

// SpecError is bad input: the CLI reports it as a usage error.
type SpecError struct{ Reason string }

func (e *SpecError) Error() string { return e.Reason }

func specErrorf(format string, args ...any) error {
	return &SpecError{Reason: fmt.Sprintf(format, args...)}
}

// Normalize fills defaults (client, test name) and validates the spec.
func (s *Spec) Normalize() error {
	if s.Client == "" {
		c, err := workloads.DefaultClient(s.System)
		if err != nil {
			return specErrorf("unknown system %q (known: %s)", s.System, strings.Join(Systems(), ", "))
		}
		s.Client = c.Name
	}
	client, err := workloads.LookupClient(s.Client)
	if err != nil {
		return &SpecError{Reason: err.Error()}
	}
	if client.System != s.System {
		return specErrorf("client %q runs on system %q, not %q", s.Client, client.System, s.System)
	}
	if s.Fencing && !client.Tokens {
		return specErrorf("--fencing on is not possible with client %q: %s", s.Client, client.NoTokens)
	}
	if _, err := nemesis.New(s.Nemesis); err != nil {
		return &SpecError{Reason: err.Error()}
	}
	switch {
	case s.Clients < 1:
		return specErrorf("clients must be at least 1, got %d", s.Clients)
	case s.TTL <= 0:
		return specErrorf("ttl must be positive, got %s", s.TTL.Std())
	case s.TimeLimit <= 0:
		return specErrorf("time limit must be positive, got %s", s.TimeLimit.Std())
	case s.Work < 0 || s.Pause < 0:
		return specErrorf("work and pause must not be negative")
	case s.ClockRate <= 0:
		return specErrorf("clock rate must be positive, got %g", s.ClockRate)
	case s.Interval <= 0:
		return specErrorf("interval must be positive, got %s", s.Interval.Std())
	case s.Key == "" || strings.ContainsAny(s.Key, " /\\\n"):
		return specErrorf("key must be a non-empty word, got %q", s.Key)
	}
	nodes, err := containers.Size(s.System, s.Nodes)
	if err != nil {
		return &SpecError{Reason: err.Error()}
	}
	if err := nemesis.Available(s.Nemesis, s.System, nodes); err != nil {
		return &SpecError{Reason: err.Error()}
	}
	if s.Test == "" {
		s.Test = s.name()
	}
	if strings.ContainsAny(s.Test, "/\\") || strings.HasPrefix(s.Test, ".") {
		return specErrorf("test name %q cannot be a directory name", s.Test)
	}
	return nil
}

func (s Spec) name() string {
	faults := strings.Join(s.Nemesis, "+")
	if faults == "" {
		faults = "none"
	}
	fencing := "nofence"
	if s.Fencing {
		fencing = "fenced"
	}
	return fmt.Sprintf("%s-%s-%s-%s", s.System, s.Client, faults, fencing)
}

// PauseLength is how long pauses last.
func (s Spec) PauseLength() time.Duration {
	if s.Pause == 0 {
		return 2 * s.TTL.Std()
	}
	return s.Pause.Std()
}

// ClockSkew is how far clock faults move a clock.
func (s Spec) ClockSkew() time.Duration {
	if s.ClockOffset == 0 {
		return 2 * s.TTL.Std()
	}
	return s.ClockOffset.Std()
}

// Systems lists the systems some lock client runs on.
func Systems() []string {
	var systems []string
	for _, name := range workloads.ClientNames() {
		c, _ := workloads.LookupClient(name)
		if !slices.Contains(systems, c.System) {
			systems = append(systems, c.System)
		}
	}
	slices.Sort(systems)
	return systems
}
