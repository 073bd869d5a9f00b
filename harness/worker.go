package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/lazydisk"
	"github.com/lockbreaker/lockbreaker/workloads"
	"github.com/lockbreaker/lockbreaker/workloads/execlock"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// The worker protocol. Each lock client is its own OS process (`lockbreaker worker`), so
// a pause is a real SIGSTOP of a real process. The harness writes one WorkerConfig line to
// the worker's stdin and later the line "stop" (or closes stdin); the worker writes one
// history event per line to stdout as it happens and its log to stderr. A directed fault
// arms the workers ("arm"; "disarm" takes it back): the next armed worker to have read the
// register under the lock writes "stopped <CLOCK_MONOTONIC ns>" and stops its own process
// group there, before its write, where a GC pause hurts, until the harness continues it.
// So the fault meets its victim at the exact point it needs, however late the harness
// hears of the read.

// WorkerConfig is the first line a worker reads.
type WorkerConfig struct {
	// Run is the run's id; the worker's environment carries it too (RunEnv), so a stray
	// worker can be told by its run.
	Run     string           `json:"run"`
	Process int              `json:"process"`
	Client  string           `json:"client"`
	Lock    workloads.Config `json:"lock"`
	Storage string           `json:"storage"`
	Work    time.Duration    `json:"work"`
	// ExtendEvery makes the holder extend its lease during its work (workloads.Counter),
	// each extend bounded by ExtendTimeout.
	ExtendEvery    time.Duration `json:"extend_every,omitempty"`
	ExtendTimeout  time.Duration `json:"extend_timeout,omitempty"`
	AcquireTimeout time.Duration `json:"acquire_timeout"`
	OpTimeout      time.Duration `json:"op_timeout"`
	// Period is from one lock cycle's start to the next's (one over the rate); 0 runs
	// cycles back to back. With a period, a cycle is followed by at least Lock.Retry.
	Period time.Duration `json:"period"`
	// BusyWork makes the worker a process a CPU quota can starve: its work is CPU work
	// (workloads.Busy), on one processor (nemesis.Needs.BusyHolders).
	BusyWork bool `json:"busy_work,omitempty"`
	// NameGrants records the client's name with each of its grants (history.ClientDetail):
	// in a run whose slots several clients share, whose was each grant.
	NameGrants bool `json:"name_grants,omitempty"`
}

// StopLine asks a worker to finish its cycle and exit; ArmLine and DisarmLine arm it to
// stop itself after its next read under the lock, and take that back.
const (
	StopLine   = "stop"
	ArmLine    = "arm"
	DisarmLine = "disarm"
)

// stoppedPrefix starts the line an armed worker writes just before it stops itself.
const stoppedPrefix = "stopped "

// A worker's exit code says how it ended, so the pool knows what to do with its slot.
const (
	// exitFailed: the worker itself failed (bad configuration, a lock that could not be
	// made); its slot takes a new worker.
	exitFailed = 1
	// exitClientLost: its lock client was lost (workloads.ErrLost, e.g. a program that
	// exited or stopped answering); its slot takes a new worker, and the run counts it.
	exitClientLost = 3
	// exitClientBroke: its lock client broke its contract (workloads.ErrBroken); the run
	// stops with a harness error.
	exitClientBroke = 4
)

// cycleBound is the longest a worker's cycle under way can take once it is told to stop:
// its acquire, the storage's read and write, its release and every extend in its work.
func (cfg WorkerConfig) cycleBound() time.Duration {
	extends := time.Duration(0)
	if cfg.ExtendEvery > 0 {
		extends = cfg.Work/cfg.ExtendEvery + 1
	}
	return cfg.AcquireTimeout + 2*cfg.OpTimeout + extends*cfg.ExtendTimeout + cfg.Work
}

// RunWorker is the body of a worker process.
func RunWorker(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewScanner(stdin)
	if !in.Scan() {
		return errors.New("worker: no configuration on stdin")
	}
	var cfg WorkerConfig
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		return fmt.Errorf("worker: bad configuration: %w", err)
	}
	if cfg.BusyWork {
		// One processor, as a Go runtime sized to a CPU limit under one CPU has (uber-go's
		// automaxprocs): with two, etcd's keepalive often ran on the second beside the work.
		runtime.GOMAXPROCS(1)
	}
	client, err := workloads.LookupClient(cfg.Client)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	lock, err := client.New(cfg.Lock)
	if errors.Is(err, workloads.ErrLost) || errors.Is(err, workloads.ErrBroken) {
		return err // it names the client itself, for the pool to quote
	}
	if err != nil {
		return fmt.Errorf("worker: %s lock: %w", cfg.Client, err)
	}
	defer lock.Close()
	if _, ok := lock.(workloads.Extender); cfg.ExtendEvery > 0 && !ok {
		return fmt.Errorf("worker: the %s lock cannot extend a lease, and its holders are to extend", cfg.Client)
	}

	// Stop when told to, or when the harness is gone (stdin closed).
	ctx, stop := context.WithCancel(context.Background())
	var armed atomic.Bool
	go func() {
		for in.Scan() && in.Text() != StopLine {
			armed.Store(in.Text() == ArmLine)
		}
		stop()
	}()

	// Events given together go out in one write: one wake-up of the harness's pump.
	var batch bytes.Buffer
	out := json.NewEncoder(&batch)
	var writeErr error
	w := workloads.Counter{
		Process:        cfg.Process,
		Key:            cfg.Lock.Key,
		Lock:           lock,
		Fencing:        cfg.Lock.Fencing,
		Work:           cfg.Work,
		ExtendEvery:    cfg.ExtendEvery,
		ExtendTimeout:  cfg.ExtendTimeout,
		Busy:           cfg.BusyWork,
		AcquireTimeout: cfg.AcquireTimeout,
		OpTimeout:      cfg.OpTimeout,
		Period:         cfg.Period,
		Yield:          cfg.Lock.Retry,
		Name:           grantsName(cfg),
		Storage: func(ctx context.Context) (*storage.Client, error) {
			return storage.Dial(ctx, cfg.Storage, cfg.Process)
		},
		Emit: func(events ...history.Event) {
			batch.Reset()
			for _, e := range events {
				out.Encode(e) // an Event always encodes
			}
			if _, err := stdout.Write(batch.Bytes()); err != nil && writeErr == nil {
				writeErr = err
				stop() // the harness cannot hear us: nothing we do would be recorded
			}
		},
		Hold: func() {
			if !armed.CompareAndSwap(true, false) {
				return
			}
			// The harness waits until the group has stopped before it acts, so a SIGCONT
			// cannot come before the SIGSTOP.
			if _, err := fmt.Fprintf(stdout, "%s%d\n", stoppedPrefix, history.Now()); err == nil {
				syscall.Kill(0, syscall.SIGSTOP)
			}
		},
	}
	return errors.Join(w.Run(ctx), writeErr)
}

// WorkerEnv marks a process as a worker. The harness starts workers from its own
// executable with this set, so a test binary can serve as the worker as well as the CLI.
const WorkerEnv = "LOCKBREAKER_WORKER"

// RunEnv names the run a worker belongs to, in its environment.
const RunEnv = "LOCKBREAKER_RUN"

// MaybeRunWorker runs the worker and exits when this process was started as one. A
// process started to serve a Go lock as an exec client's program does that instead
// (execlock.MaybeServe).
func MaybeRunWorker() {
	execlock.MaybeServe()
	lazydisk.MaybeServe()
	if os.Getenv(WorkerEnv) != "1" {
		return
	}
	// An exec client's program is not a worker, even when it is this binary again.
	os.Unsetenv(WorkerEnv)
	if err := RunWorker(os.Stdin, os.Stdout); err != nil {
		// The last line on stderr is the reason, for the pool to quote.
		fmt.Fprintln(os.Stderr, strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(exitCode(err))
	}
	os.Exit(0)
}

// exitCode is the exit code of a worker that ended with err.
func exitCode(err error) int {
	switch {
	case errors.Is(err, workloads.ErrBroken):
		return exitClientBroke
	case errors.Is(err, workloads.ErrLost):
		return exitClientLost
	}
	return exitFailed
}

// grantsName is the name a worker records with its grants: its client's, when grants are
// named (WorkerConfig.NameGrants).
func grantsName(cfg WorkerConfig) string {
	if cfg.NameGrants {
		return cfg.Client
	}
	return ""
}
