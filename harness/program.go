package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/workloads"
	"github.com/lockbreaker/lockbreaker/workloads/execlock"
)

// checkedPrograms are the exec clients' programs this process has seen start, by their
// command line and working directory: a suite's runs check theirs once.
var checkedPrograms sync.Map

// CheckProgram starts an exec client's program once, before anything of a run exists
// (execlock.Check), so that a program missing its runtime, interpreter or library is
// refused with its own last words as bad input (exit 254) and never starts a cluster. A
// spec of any other client has nothing to check; a program that has passed in this
// process is not started again.
func CheckProgram(ctx context.Context, spec Spec) error {
	if len(spec.ClientCmd) == 0 {
		return nil
	}
	wd, _ := os.Getwd()
	key := wd + "\x00" + strings.Join(spec.ClientCmd, "\x00")
	if _, ok := checkedPrograms.Load(key); ok {
		return nil
	}
	cfg := workloads.Config{System: spec.System, Program: spec.ClientCmd, Key: spec.Key, TTL: spec.TTL.Std(),
		Fencing: spec.Fencing, OpTimeout: nodeTimeout(spec.TTL.Std()), Retry: spec.Retry.Std(), Owner: "check"}
	if err := execlock.Check(ctx, cfg, execlock.Defaults.Ready); err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return &SpecError{Reason: fmt.Sprintf("--client-cmd: %v", err)}
	}
	checkedPrograms.Store(key, true)
	return nil
}

// nodeTimeout is how long a lock client's request to one node may take: a node that does
// not answer must cost a small part of the lease (Redlock asks nodes one after another).
func nodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 50*time.Millisecond), 500*time.Millisecond)
}
