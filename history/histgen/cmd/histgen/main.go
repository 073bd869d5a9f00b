// Command histgen writes a run directory holding a generated history (see package
// histgen) and the summary that states its lock's lease, for `lockbreaker check DIR` to
// judge: `make bench` times that.
//
//	histgen -ops 100000 -clients 20 -fencing -effects DIR
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/history/histgen"
	"github.com/lockbreaker/lockbreaker/results"
)

func main() {
	var cfg histgen.Config
	flag.IntVar(&cfg.Ops, "ops", 100_000, "client operations")
	flag.IntVar(&cfg.Clients, "clients", 5, "clients contending for the one key")
	flag.BoolVar(&cfg.Fencing, "fencing", false, "send tokens to the storage, which rejects stale ones")
	flag.BoolVar(&cfg.Effects, "effects", true, "record what the servers saw (effect_from, effect_to), as workers do")
	flag.BoolVar(&cfg.Kills, "kills", false, "kill the holder now and then (kill-client) instead of pausing it: its lease runs out unreleased")
	flag.BoolVar(&cfg.Unreachable, "unreachable", false, "fail a release now and then as unreachable: the holder lets go, its lease runs out")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	flag.Parse()
	if flag.NArg() != 1 || cfg.Ops <= 0 || cfg.Clients <= 0 {
		fmt.Fprintln(os.Stderr, "usage: histgen [-ops N] [-clients N] [-fencing] [-effects=false] [-kills] [-unreachable] [-seed N] DIR")
		os.Exit(2)
	}
	// The run's summary says what its lock promised, as a run's does: lease-safety judges by it.
	summary := results.Summary{Test: "histgen", Lease: &history.Lease{TTL: histgen.TTL, Kept: history.KeptByKey}}
	if err := errors.Join(histgen.WriteRun(flag.Arg(0), cfg), results.WriteSummary(flag.Arg(0), summary)); err != nil {
		fmt.Fprintln(os.Stderr, "histgen:", err)
		os.Exit(1)
	}
}
