// Package execlock is the exec lock client: a lock written in any language, as a program
// that speaks JSON lines on its stdin and stdout (docs/protocol.md). The worker keeps the
// critical section (the storage reads and writes), so every checker judges an exec client
// exactly as a Go one; the program only acquires and releases. It is one more client in
// the workloads registry ("exec"), driven by the same worker loop as the others.
//
// The program is a child of its worker: it stays in the worker's process group, so the
// nemeses' SIGSTOP, SIGCONT and SIGKILL reach it with the worker (a paused client's
// heartbeat threads stop too), and in the worker's network namespace, so per-client cuts
// apply to it unchanged. It dies with its worker (Pdeathsig).
//
// A program is never trusted to be well-behaved. A line that is not the protocol (not
// JSON, too long, an answer that does not fit the request, a line nobody asked for)
// breaks the client (workloads.ErrBroken): the run stops and says so, and judges nothing
// by it. A program that exits or stops answering is lost (workloads.ErrLost): the
// operation under way is indeterminate and a new client takes the slot. Waiting never
// outlasts a bound, and time the program spent stopped by a nemesis does not count
// against it.
package execlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// The wire format. Durations are seconds (JSON numbers), as most languages' lock
// libraries take them; every key of Config is always present.

// Config is the first line the program reads: how to reach the lock service.
type Config struct {
	System    string   `json:"system"`
	Nodes     []string `json:"nodes"`
	Sentinels []string `json:"sentinels"`
	// SentinelMaster is the name the Sentinels know the primary by ("" without them).
	SentinelMaster string  `json:"sentinel_master"`
	Key            string  `json:"key"`
	TTL            float64 `json:"ttl"`
	Fencing        bool    `json:"fencing"`
	RequestTimeout float64 `json:"request_timeout"`
	Retry          float64 `json:"retry"`
	Owner          string  `json:"owner"`
	// Extend says the run's holders will send extend requests (--extend-every): a program
	// whose lock cannot extend a lease refuses the configuration.
	Extend bool `json:"extend"`
}

// Request is a line the harness sends after the configuration.
type Request struct {
	Op string `json:"op"`
	// Timeout is how long the program may go on trying (acquire) or take (release).
	Timeout float64 `json:"timeout"`
}

// The requests.
const (
	OpAcquire = "acquire"
	OpRelease = "release"
	// OpExtend renews the holder's lease for a TTL from now; sent only when the
	// configuration's extend is true.
	OpExtend = "extend"
)

// Answer is a line the program writes: one for the configuration, one per request.
type Answer struct {
	Result  string `json:"result"`
	Message string `json:"message,omitempty"`
	// Token is a grant's fencing token, when the lock has one.
	Token *int64 `json:"token,omitempty"`
	// Validity, optional, is for how long (seconds) the lease is valid from the grant on.
	Validity *float64 `json:"validity,omitempty"`
	// AttemptStarted, optional, is when the granted attempt began: seconds on
	// CLOCK_MONOTONIC (Python's time.monotonic()).
	AttemptStarted *float64          `json:"attempt_started,omitempty"`
	Detail         map[string]string `json:"detail,omitempty"`
	// Lease, optional on ready, says what keeps the program's grants alive
	// (history.Keeping: "key" or "session"), which lease-safety judges them by.
	Lease history.Keeping `json:"lease,omitempty"`
}

// The answers' results: to the configuration, to acquire, to release, to extend, and to
// any request.
const (
	Ready    = "ready"
	Refused  = "refused"
	Granted  = "granted"
	Busy     = "busy"
	Released = "released"
	Extended = "extended"
	NotHeld  = "not-held"
	Unknown  = "unknown"
)

// MaxLine is the longest line a program may write: far more than any answer needs, and
// a bound on what a runaway program can make the worker hold.
const MaxLine = 64 << 10

// configOf is the configuration line for cfg.
func configOf(cfg workloads.Config) Config {
	c := Config{System: cfg.System, Nodes: cfg.Nodes, Sentinels: cfg.Sentinels, Key: cfg.Key,
		TTL: cfg.TTL.Seconds(), Fencing: cfg.Fencing, RequestTimeout: cfg.OpTimeout.Seconds(),
		Retry: cfg.Retry.Seconds(), Owner: cfg.Owner, Extend: cfg.Extend}
	if c.Nodes == nil {
		c.Nodes = []string{}
	}
	if c.Sentinels == nil {
		c.Sentinels = []string{}
	}
	if len(c.Sentinels) > 0 {
		c.SentinelMaster = system.SentinelMaster
	}
	return c
}

// lockConfig is the lock client's configuration a configuration line stands for.
func (c Config) lockConfig() workloads.Config {
	return workloads.Config{System: c.System, Nodes: c.Nodes, Sentinels: c.Sentinels, Key: c.Key,
		TTL: seconds(c.TTL), Fencing: c.Fencing, OpTimeout: seconds(c.RequestTimeout), Retry: seconds(c.Retry), Owner: c.Owner,
		Extend: c.Extend}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// decode reads one line as exactly one JSON object with only v's keys.
func decode(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("line %s is not the protocol's JSON: %s", quote.Short(string(line)), quote.ShortenAll(err.Error()))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("line %s holds more than one JSON value", quote.Short(string(line)))
	}
	return nil
}

// encode writes v as one line.
func encode(w io.Writer, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}
