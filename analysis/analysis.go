// Package analysis turns a saved run into its Summary: it judges the history file
// (checkers.Stream) against what the run's spec asked for (its faults, and the hazards its
// nemeses exist to create), counts the operations and faults, and writes results.json,
// report.html and junit.xml. A run judges its history here when it ends, and `lockbreaker
// check` and `report` judge or draw a saved one here later, so both give the same bytes.
//
// It needs nothing but the files: it imports no Docker client, no worker, no containers,
// no harness, no nemesis and no lock client (the harness imports it, never the reverse;
// TestOfflineCommandsLinkNoDocker). The hazards a spec's nemeses target come from
// history's table of them (history.Targets), not from the nemeses.
package analysis

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/async"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
)

// File judges a history file as it reads it (checkers.Stream: each porcupine search
// bounded by checkers.DefaultSteps steps of its model, so that the verdicts depend on the
// history alone, never on the machine's speed; its memory bounded by limits), completes
// the summary from it (results, verdict, op and fault counts, rerun command) and writes
// results.json, report.html and junit.xml into dir. It needs nothing but the history and
// the summary's spec, so a run and a `lockbreaker check` of it later get the same
// verdicts. The summary's times and error are the caller's and are kept, and so are its
// notes, to which it adds its own once: checking again changes no byte of results.json. A
// history larger than memory is judged in bounded memory; the report's timeline is then
// drawn from its first events (results.Drawing), as a note says. An error reading the
// history leaves s without results; any other is about writing the files, and the
// summary is complete either way.
//
// ctx bounds no search unless the caller gives it an end: a run gives it none; `check
// --timeout` gives it a deadline, a wall-clock guard for the user's patience, whose cause
// is then the summary of every search it stopped (unknown).
func File(ctx context.Context, dir, path string, s results.Summary, limits checkers.Limits) (results.Summary, error) {
	opts := options(dir, s)
	stream := checkers.NewStream(ctx, opts, limits)
	defer stream.Close() // a history that fails to read leaves pieces with the judges
	var nemesis []history.Event
	drawing := results.NewDrawing()
	counts := results.OpCounts{}
	var open history.ByProcess[history.Func]
	faults, spent := 0, 0
	var slowed bool                    // the network was slowed (slow-network)
	leastValidity := time.Duration(-1) // the least validity a grant stated; -1: none did
	seen, events := read{inOrder: true}, 0
	note, err := history.Scan(path, func(e history.Event) error {
		seen.inOrder = seen.inOrder && e.Index == events
		events++
		stream.Add(e)
		drawing.Add(e)
		switch {
		case e.Process == history.NemesisProcess:
			nemesis = append(nemesis, e)
			slowed = slowed || e.Fault == history.SlowNetwork.Name
			if e.Func == history.Start {
				faults++
			}
		case e.Type == history.Invoke:
			open.Set(e.Process, e.Func)
		default:
			open.Delete(e.Process)
			counts.Add(e.Func, e.Type)
			if e.Func == history.Acquire && e.Type == history.Fail && e.Detail[history.ValiditySpent] != "" {
				spent++
			}
			if e.Func != history.Acquire || e.Type != history.OK || e.Detail[history.Validity] == "" {
				break // parsing no validity would allocate its error, every event
			}
			if v, err := time.ParseDuration(e.Detail[history.Validity]); err == nil && (leastValidity < 0 || v < leastValidity) {
				leastValidity = v
			}
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	// The timeline's events are read again while the last pieces are judged.
	var timelineErr error
	timelineRead := async.Go(func() { drawing.Events, timelineErr = timeline(path, drawing.Total) })
	for _, f := range open.All() { // never completed: indeterminate, as the checkers count it
		counts.Add(f, history.Info)
	}
	s.Results, s.Ops = stream.Results(), counts
	var notes []string
	if note != "" {
		notes = append(notes, note)
	}
	seen.nemesis = nemesis
	if err := tellRead(path, s.Results, s.Spec, &seen); err != nil {
		notes = append(notes, "the first violation could not be told: "+err.Error())
	}
	if n := validityNote(spent, slowed, leastValidity); n != "" {
		notes = append(notes, n)
	}
	s.NotServing = nil
	for _, e := range nemesis {
		if e.Func == history.NotServing {
			s.NotServing = append(s.NotServing, e.Targets...)
			notes = append(notes, unservedNote(e))
		}
	}
	notes = append(notes, stream.Notes()...)
	timelineRead.Wait()
	if n := drawing.Note(); n != "" { // of the events read again, however many
		notes = append(notes, n)
	}
	if timelineErr != nil {
		notes = append(notes, "the report's timeline could not be read: "+timelineErr.Error())
	}
	for _, n := range notes { // a check run again finds the notes of the last one
		if !slices.Contains(s.Notes, n) {
			s.Notes = append(s.Notes, n)
		}
	}
	return finish(dir, s, drawing, faults, nemesis, opts.Hazards)
}

// validityNote says how many acquires a majority granted too late to use
// (history.ValiditySpent): slowness the lock saw and refused, which no verdict counts. When
// none was, on a run whose network was slowed, it says how close the grants came: the least
// validity a grant was left with (-1: no grant stated one, and there is nothing to say).
func validityNote(spent int, slowed bool, least time.Duration) string {
	switch {
	case spent == 0 && slowed && least >= 0:
		return fmt.Sprintf("no acquire was granted only after the lock's validity had run out, though the network was "+
			"slowed: the least validity a grant was left with was %s", least.Round(time.Millisecond))
	case spent == 0:
		return ""
	}
	what := "1 acquire was"
	if spent != 1 {
		what = fmt.Sprintf("%d acquires were", spent)
	}
	return what + " granted by a majority only after the lock's validity had run out (the attempt took longer than " +
		"the TTL less the drift allowance): the client released each and used none"
}

// options are the checkers' options for a run's history.
func options(dir string, s results.Summary) checkers.Options {
	faults, hazards := requested(s.Spec)
	opts := checkers.Options{Dir: dir, FaultsRequested: faults, Hazards: hazards}
	if s.Lease != nil {
		opts.Lease = *s.Lease
	}
	return opts
}

// finish completes the summary from the verdicts and writes the files, the report drawing
// d; nemesis holds at least the hazard events.
func finish(dir string, s results.Summary, d *results.Drawing, faults int, nemesis []history.Event, hazards map[string]history.Hazard) (results.Summary, error) {
	s.Verdict = overall(s.Results, s.Error != "" || len(s.NotServing) > 0)
	s.Faults = faults
	s.Hazards = results.CountHazards(nemesis, hazards)
	s.Command = spec.ReproduceCommand(s.Spec)
	return s, results.WriteAll(dir, s, d)
}

// overall is a run's verdict: the worst of the checkers' (unknown when none decided) and
// never valid when the run was cut short (the harness broke, or a node did not serve
// again), since its history is then partial.
func overall(rs []checkers.Result, cutShort bool) checkers.Verdict {
	v := checkers.Worst(rs)
	if v == checkers.Valid && cutShort {
		return checkers.Unknown
	}
	return v
}

// unservedNote says of a node a fault took down that did not serve again (e, a
// history.NotServing) that the service did not come back, and where its log is.
func unservedNote(e history.Event) string {
	logs := make([]string, len(e.Targets))
	for i, node := range e.Targets {
		logs[i] = filepath.Join(results.NodesDir, node+".log")
	}
	return fmt.Sprintf("%s after a fault took it down: the service did not come back (or the machine was too busy to "+
		"let it), so the run ended there and no verdict of it can be valid (the log: %s)", e.Message, strings.Join(logs, ", "))
}

// requested says whether the spec asked for any fault, and which hazards its nemeses exist
// to create (history.Targets). A history checked without its spec is held to neither.
func requested(saved json.RawMessage) (faults bool, hazards map[string]history.Hazard) {
	var s spec.Spec
	if json.Unmarshal(saved, &s) != nil {
		return false, nil
	}
	return history.Injecting(s.Nemesis), history.Targets(s.Nemesis)
}
