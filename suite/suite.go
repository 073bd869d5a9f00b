// Package suite runs a matrix of scenarios (cells) and judges each against what it is
// expected to show, so that one command answers which locks are safe under which faults,
// with and without fencing: "kleppmann" is the design's expected-outcome table as data,
// "smoke" a few fast cells, and users write their own cells in a YAML or JSON file.
//
// A cell is a harness spec and an expected verdict per checker: valid, invalid, either
// (the scenario does not decide that property) or not-applicable, and optionally the least
// number of times each hazard (history.Hazard) must occur in a run for the run to speak
// for the cell. Each cell runs once per seed; a cell expecting a violation reports how often it was found (its detection rate)
// and how soon, and fails below its threshold; a cell expecting a property to hold fails
// on any violation. The judging (judge.go) is pure: it reads run summaries and nothing
// else, so it is tested on hand-made ones. The writers (suite.json, suite.html, junit.xml)
// render a judged Result and decide nothing.
//
// The shards of a suite run (--shard i/n) merge into the result an unsharded run gives
// (merge.go), each cell judged again by Judge. A suite's runs in a store are compared run
// after run (trend.go, pure as the judging is): regressions, violations of what a cell
// expects to hold, drifting detection rates, for `suite compare` and the store's index.
//
// This package never judges a history itself (the checkers do) and never changes a spec
// beyond its seed and lock key: a cell's runs are the runs `lockbreaker run` would make.
package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/spec"
)

// Expect is what a cell expects one checker to say.
type Expect string

const (
	ExpectValid   Expect = "valid"
	ExpectInvalid Expect = "invalid"
	// ExpectEither: the scenario does not decide this property; any verdict is fine.
	ExpectEither Expect = "either"
	// ExpectNotApplicable: the run cannot have this property (fencing without tokens).
	ExpectNotApplicable Expect = "not-applicable"
)

// DefaultThreshold is the share of seeds in which a cell must find its expected violation.
const DefaultThreshold = 0.9

// Suite is a named list of cells.
type Suite struct {
	Name  string `json:"name"`
	About string `json:"about,omitempty"`
	Cells []Cell `json:"cells"`
}

// Cell is one scenario and what its runs are expected to show.
type Cell struct {
	// Name is unique in its suite; it names the cell's runs' directory.
	Name string `json:"name"`
	// Spec is the run; its seed is the first of the cell's seeds.
	Spec spec.Spec `json:"spec"`
	// Expect maps a checker's name to its expected verdict; a checker not named: either.
	Expect map[checkers.Name]Expect `json:"expect"`
	// Threshold is the share of seeds in which every checker expected invalid must say
	// invalid; 0 means DefaultThreshold.
	Threshold float64 `json:"threshold,omitempty"`
	// Why says where the expectation comes from, for readers of the matrix.
	Why string `json:"why,omitempty"`
	// Hazards are the least number of times each hazard must occur in one run, e.g.
	// {grant-lost: 3}: a run short of one did not test what the cell is about (see Judge).
	Hazards map[history.Hazard]int `json:"hazards,omitempty"`
	// Alone runs the cell's runs with no other run beside them (suite --parallel): a cell
	// whose fault must land within a lease on a machine that is not busy.
	Alone bool `json:"alone,omitempty"`
	// StopEarly ends each run a grace after its first violation (spec.Spec.StopEarly);
	// unset, it is on for a cell that expects only violations (stopsEarly).
	StopEarly *bool `json:"stop_early,omitempty"`
}

// stopsEarly says whether the cell's runs stop at their first violation: as the cell or
// its spec says, else when the cell expects violations and nothing to hold (stats, the
// precondition, aside) and no count of hazards that a run cut short might not reach.
func (c Cell) stopsEarly() bool {
	switch {
	case c.Spec.StopEarly:
		return true
	case c.StopEarly != nil:
		return *c.StopEarly
	case len(c.Hazards) > 0 || len(c.expecting(ExpectInvalid)) == 0:
		return false
	}
	valid := c.expecting(ExpectValid)
	return len(valid) == 0 || len(valid) == 1 && valid[0] == checkers.Stats
}

// threshold is the cell's threshold with the default filled in.
func (c Cell) threshold() float64 {
	if c.Threshold == 0 {
		return DefaultThreshold
	}
	return c.Threshold
}

// expecting lists the checkers the cell expects to say e, in checker order.
func (c Cell) expecting(e Expect) []checkers.Name {
	var names []checkers.Name
	for _, ck := range checkers.All() {
		if c.Expect[ck.Name()] == e {
			names = append(names, ck.Name())
		}
	}
	return names
}

// Error is a suite that cannot run as written: the CLI reports it as bad input.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

func errorf(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// SpecCheck completes a cell's spec and checks that what it names exists here and fits
// together (its system, client and nemeses; a system file it names, read and registered),
// returning the spec as it will run: the harness's (harness.CheckSpec), handed in as the
// Runner is, since answering links every lock client and the nemeses, which the suite's
// judging never needs. Its refusals are *spec.Error.
type SpecCheck func(spec.Spec) (spec.Spec, error)

// Check validates the suite and fills its cells' defaults (names, clients) through check,
// so that a mistake in cell 30 is found before cell 1 runs.
func (s *Suite) Check(check SpecCheck) error {
	if check == nil {
		return errors.New("suite: no SpecCheck to check its cells with (harness.CheckSpec)")
	}
	if s.Name == "" || !printable(s.Name) || strings.ContainsAny(s.Name, "/\\ ") {
		return errorf("suite name must be a printable word without / or \\, got %s", quote.Short(s.Name))
	}
	if len(s.Cells) == 0 {
		return errorf("suite %s has no cells", s.Name)
	}
	known := map[checkers.Name]bool{}
	for _, ck := range checkers.All() {
		known[ck.Name()] = true
	}
	seen := map[string]bool{}
	for i := range s.Cells {
		c := &s.Cells[i]
		if err := c.check(known, check); err != nil {
			return errorf("suite %s, cell %d (%s): %v", s.Name, i+1, c.Name, err)
		}
		if seen[c.Name] {
			return errorf("suite %s: two cells are named %s", s.Name, c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

func (c *Cell) check(known map[checkers.Name]bool, check SpecCheck) error {
	checked, err := check(c.Spec)
	if err != nil {
		var spec *spec.Error
		if errors.As(err, &spec) {
			return errors.New(spec.Reason)
		}
		return err
	}
	c.Spec = checked
	if c.Name == "" {
		c.Name = c.Spec.Test
	}
	if !printable(c.Name) || strings.ContainsAny(c.Name, "/\\") || strings.HasPrefix(c.Name, ".") {
		return fmt.Errorf("cell name %s cannot be a directory name", quote.Short(c.Name))
	}
	c.Spec.Test = c.Name
	if len(c.Expect) == 0 {
		return errors.New("expects nothing: name at least one checker and its verdict")
	}
	for name, e := range c.Expect {
		if !known[name] {
			return fmt.Errorf("expects %s of checker %s, which does not exist (checkers: %s)", quote.Short(e), quote.Short(string(name)), checkerList())
		}
		switch e {
		case ExpectValid, ExpectInvalid, ExpectEither, ExpectNotApplicable:
		default:
			return fmt.Errorf("checker %s: expectation must be valid, invalid, either or not-applicable, got %s", name, quote.Short(e))
		}
	}
	if !(c.Threshold >= 0 && c.Threshold <= 1) {
		return fmt.Errorf("threshold must be between 0 and 1 (0: the default %g), got %g", DefaultThreshold, c.Threshold)
	}
	for _, h := range slices.Sorted(maps.Keys(c.Hazards)) {
		if !h.Known() {
			return fmt.Errorf("requires hazard %s, which does not exist (hazards: %s)", quote.Short(h), hazardNames())
		}
		if n := c.Hazards[h]; n < 1 {
			return fmt.Errorf("hazard %s: the least number per run must be at least 1, got %d", h, n)
		}
	}
	return nil
}

func hazardNames() string {
	var names []string
	for _, h := range history.KnownHazards() {
		names = append(names, string(h))
	}
	return strings.Join(names, ", ")
}

func checkerNames() []checkers.Name {
	var names []checkers.Name
	for _, ck := range checkers.All() {
		names = append(names, ck.Name())
	}
	return names
}

// checkerList is every checker's name, comma-separated, for a message.
func checkerList() string { return joinNames(checkerNames(), ", ") }

// joinNames joins checkers' names with sep.
func joinNames(names []checkers.Name, sep string) string {
	words := make([]string, len(names))
	for i, name := range names {
		words[i] = string(name)
	}
	return strings.Join(words, sep)
}

// printable reports whether s is valid text a terminal and a file name can take.
func printable(s string) bool {
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Shard is the part of a suite one CI runner takes: Index of Count, from 1.
type Shard struct{ Index, Count int }

// ParseShard reads "i/n"; "" is the whole suite (1/1).
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{1, 1}, nil
	}
	var sh Shard
	var rest string
	if n, _ := fmt.Sscanf(s, "%d/%d%s", &sh.Index, &sh.Count, &rest); n != 2 || sh.Count < 1 || sh.Index < 1 || sh.Index > sh.Count {
		return Shard{}, errorf("--shard must be i/n with 1 <= i <= n, e.g. 2/4, got %s", quote.Short(s))
	}
	return sh, nil
}

func (sh Shard) String() string { return fmt.Sprintf("%d/%d", sh.Index, sh.Count) }

// Of returns the shard's cells: a contiguous block, so cells of one system stay together
// and share a cluster; the blocks of all shards cover the suite once.
func (sh Shard) Of(cells []Cell) []Cell {
	from, to := sh.bounds(len(cells))
	return cells[from:to]
}

// bounds are where the shard's block of n cells starts and ends.
func (sh Shard) bounds(n int) (from, to int) {
	return n * (sh.Index - 1) / sh.Count, n * sh.Index / sh.Count
}

// cellNames lists the cells' names, in order.
func cellNames(cells []Cell) []string {
	var list []string
	for _, c := range cells {
		list = append(list, c.Name)
	}
	return list
}

// definition identifies the checked suite's cells as they run: a hash of their specs,
// expectations and thresholds. Two shards with the same definition split the same matrix.
func (s Suite) definition() (string, error) {
	data, err := json.Marshal(s.Cells)
	if err != nil {
		return "", fmt.Errorf("suite %s: encode its cells: %w", s.Name, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

// Duration is a time.Duration written as "1.5s" in suite files and suite.json.
type Duration = spec.Duration

// durationOf converts for the JSON form.
func durationOf(d time.Duration) *Duration {
	v := Duration(d)
	return &v
}
