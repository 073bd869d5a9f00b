// Package checkers decides, from a recorded history alone, whether a run kept its promises:
// was the lock a mutex (lock-linearizable, mutual-exclusion), did the storage it guards stay
// correct (data-safety, lost-updates), did fencing tokens do their job (fencing).
//
// Checkers are pure: they read []history.Event and never import containers, workers or
// anything that touches Docker, so `lockbreaker check DIR` can re-run them on a saved run.
// Each returns its own verdict; they are never collapsed into one bit except for the exit
// code, where invalid beats unknown beats valid (as Jepsen's checker/compose does).
package checkers

import (
	"context"
	"fmt"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// Verdict is a checker's answer.
type Verdict string

const (
	Valid   Verdict = "valid"
	Invalid Verdict = "invalid"
	// Unknown: the checker could not decide (timeout, crash, not enough data). Never a pass.
	Unknown Verdict = "unknown"
)

// Result is one checker's verdict with the evidence behind it.
type Result struct {
	Checker string  `json:"checker"`
	Verdict Verdict `json:"verdict"`
	// Summary is one line a person reads first, e.g. "2 overlapping holds".
	Summary string `json:"summary"`
	// Evidence are concrete lines pointing into the history (event indexes, clients, times).
	Evidence []string `json:"evidence,omitempty"`
	// Counts are the numbers behind the verdict, e.g. "stale-rejected": 3.
	Counts map[string]int `json:"counts,omitempty"`
	// Files are artifacts the checker wrote into Options.Dir (names relative to it).
	Files []string `json:"files,omitempty"`
}

// Options are what a checker may use besides the history.
type Options struct {
	// Dir is where a checker may write artifacts (porcupine's visualisation); empty: none.
	Dir string
	// Timeout bounds a search (porcupine); when it runs out the verdict is Unknown.
	Timeout time.Duration
}

// Checker decides one property of a history.
type Checker interface {
	Name() string
	Check(ctx context.Context, events []history.Event, opts Options) Result
}

// All returns every checker, in the order reports list them: lock safety first
// (lock-linearizable, mutual-exclusion), then data safety (data-safety, lost-updates),
// then fencing, then the herd metric.
func All() []Checker {
	return []Checker{NewLockLinearizable(), NewMutualExclusion(), NewDataSafety(), NewLostUpdates(), NewFencing(), NewHerd()}
}

// Worst merges verdicts: invalid beats unknown beats valid.
func Worst(results []Result) Verdict {
	v := Valid
	for _, r := range results {
		switch {
		case r.Verdict == Invalid:
			return Invalid
		case r.Verdict != Valid:
			v = Unknown
		}
	}
	return v
}

// RunAll runs every checker, each guarded so a crash becomes Unknown, never a pass.
func RunAll(ctx context.Context, cs []Checker, events []history.Event, opts Options) []Result {
	results := make([]Result, 0, len(cs))
	for _, c := range cs {
		results = append(results, safeCheck(ctx, c, events, opts))
	}
	return results
}

func safeCheck(ctx context.Context, c Checker, events []history.Event, opts Options) (r Result) {
	defer func() {
		if p := recover(); p != nil {
			r = Result{Checker: c.Name(), Verdict: Unknown, Summary: fmt.Sprintf("checker crashed: %v", p)}
		}
	}()
	r = c.Check(ctx, events, opts)
	r.Checker = c.Name()
	if r.Verdict == "" {
		r.Verdict = Unknown
	}
	return r
}
