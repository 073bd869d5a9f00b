package suite

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockbreaker/lockbreaker/results"
)

// Merge joins the shards of one suite run (suite NAME --shard i/n) into the result an
// unsharded run of the same cells and seeds gives: every cell in the suite's order, each
// judged again on its runs by Judge, the suite's status tallied from them. It refuses
// (Error) shards of different suites, definitions or seeds, shards whose cells overlap,
// and shards that together do not cover every cell with every seed.
func Merge(shards []Record) (Result, error) {
	if len(shards) == 0 {
		return Result{}, errorf("merge: give the directories of a suite run's shards")
	}
	first := shards[0]
	for _, sh := range shards {
		if err := sameRun(first, sh); err != nil {
			return Result{}, err
		}
	}
	all := first.Result.AllCells
	owner := map[string]Record{}
	byName := map[string]CellResult{}
	for _, sh := range shards {
		for _, c := range sh.Result.Cells {
			name := c.Cell.Name
			if !slices.Contains(all, name) {
				return Result{}, errorf("%s: cell %s is not one of suite %s's cells", sh.Dir, name, sh.Result.Suite)
			}
			if o, ok := owner[name]; ok {
				if o.Result.Shard == sh.Result.Shard && o.Result.Started.Equal(sh.Result.Started) {
					return Result{}, errorf("%s and %s are the same run of shard %s", o.Dir, sh.Dir, sh.Result.Shard)
				}
				return Result{}, errorf("cell %s is in both %s (shard %s) and %s (shard %s): the shards overlap",
					name, o.Dir, o.Result.Shard, sh.Dir, sh.Result.Shard)
			}
			if len(c.Runs) != sh.Result.Seeds {
				return Result{}, errorf("%s: cell %s has %d of its %d seeds (shard %s stopped in it%s): run that shard again",
					sh.Dir, name, len(c.Runs), sh.Result.Seeds, sh.Result.Shard, because(sh.Result.Error))
			}
			owner[name], byName[name] = sh, c
		}
	}
	if err := uncovered(all, owner, shards); err != nil {
		return Result{}, err
	}
	r := Result{Suite: first.Result.Suite, About: first.Result.About, Seeds: first.Result.Seeds, SeedOffset: first.Result.SeedOffset, Shard: Shard{1, 1}.String(),
		AllCells: all, Definition: first.Result.Definition, Started: first.Result.Started, Finished: first.Result.Finished}
	var errs []string
	for _, sh := range byShard(shards) {
		r.Merged = append(r.Merged, MergedShard{Shard: sh.Result.Shard, Started: sh.Result.Started, ID: path.Base(sh.ID)})
		if sh.Result.Started.Before(r.Started) {
			r.Started = sh.Result.Started
		}
		if sh.Result.Finished.After(r.Finished) {
			r.Finished = sh.Result.Finished
		}
		if sh.Result.Error != "" {
			errs = append(errs, fmt.Sprintf("shard %s: %s", sh.Result.Shard, sh.Result.Error))
		}
	}
	r.Error = strings.Join(errs, "; ")
	for _, name := range all {
		c := byName[name]
		r.Cells = append(r.Cells, Judge(c.Cell, c.Runs))
	}
	r.Tally()
	return r, nil
}

// sameRun refuses a shard that is not of the same suite run as the first.
func sameRun(first, sh Record) error {
	a, b := first.Result, sh.Result
	switch {
	case len(b.AllCells) == 0 || b.Definition == "":
		return errorf("%s: its %s does not name the whole suite's cells (written before shards could be merged): run that shard again",
			sh.Dir, JSONFile)
	case b.Suite != a.Suite:
		return errorf("%s is suite %s, %s is suite %s: shards of different suites", first.Dir, a.Suite, sh.Dir, b.Suite)
	case b.Definition != a.Definition || !slices.Equal(b.AllCells, a.AllCells):
		return errorf("%s and %s ran different definitions of suite %s (its cells, specs or expectations changed between them)",
			first.Dir, sh.Dir, a.Suite)
	case b.Seeds != a.Seeds:
		return errorf("%s ran %d seeds per cell, %s ran %d: shards of different runs", first.Dir, a.Seeds, sh.Dir, b.Seeds)
	case b.SeedOffset != a.SeedOffset:
		return errorf("%s moved its seeds by %d, %s by %d: shards of different runs", first.Dir, a.SeedOffset, sh.Dir, b.SeedOffset)
	}
	return nil
}

// uncovered says which of the suite's cells no shard ran: the shards that are missing,
// or the shard that stopped before them.
func uncovered(all []string, owner map[string]Record, shards []Record) error {
	var missing []string
	for _, name := range all {
		if _, ok := owner[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// Which shard of the others' count would have run each missing cell.
	count := 0
	given := map[int]Record{}
	for _, sh := range shards {
		s, err := ParseShard(sh.Result.Shard)
		if err != nil || (count != 0 && s.Count != count) {
			count = -1
			break
		}
		count, given[s.Index] = s.Count, sh
	}
	var why []string
	if count > 0 {
		for i := 1; i <= count; i++ {
			from, to := Shard{i, count}.bounds(len(all))
			var its []string
			for _, name := range all[from:to] {
				if slices.Contains(missing, name) {
					its = append(its, name)
				}
			}
			switch sh, ok := given[i]; {
			case len(its) == 0:
			case ok:
				why = append(why, fmt.Sprintf("shard %d/%d (%s) stopped before %s%s", i, count, sh.Dir, list(its), because(sh.Result.Error)))
			default:
				why = append(why, fmt.Sprintf("shard %d/%d is missing (%s)", i, count, list(its)))
			}
		}
	} else {
		why = append(why, "no shard ran "+list(missing))
	}
	return errorf("the shards do not cover suite %s: %s", shards[0].Result.Suite, strings.Join(why, "; "))
}

// list names cells: "cell a", "cells a, b, c and 4 more".
func list(cells []string) string {
	if len(cells) == 1 {
		return "cell " + cells[0]
	}
	const shown = 3
	if len(cells) > shown+1 {
		return fmt.Sprintf("cells %s and %d more", strings.Join(cells[:shown], ", "), len(cells)-shown)
	}
	return "cells " + strings.Join(cells, ", ")
}

func because(err string) string {
	if err == "" {
		return ""
	}
	return ": " + err
}

// byShard orders shards by their index, then their start.
func byShard(shards []Record) []Record {
	sorted := slices.Clone(shards)
	index := func(r Record) int {
		s, _ := ParseShard(r.Result.Shard)
		return s.Index
	}
	slices.SortStableFunc(sorted, func(a, b Record) int {
		return cmp.Or(cmp.Compare(index(a), index(b)), a.Result.Started.Compare(b.Result.Started))
	})
	return sorted
}

// MergeInto merges the suite runs of dirs (each a suite run's directory, or a directory
// holding exactly one, such as a shard's store) into a new suite directory under root,
// root/suite-<name>/<time of the first shard>/: its suite.json, suite.html and junit.xml
// are the whole suite's, and every run a shard's matrix links is copied under its runs/,
// so the links hold when the directory is kept alone. Refusals are Error, and leave no
// directory behind.
func MergeInto(root string, dirs []string) (string, Result, error) {
	var shards []Record
	var runs []string // the runs' directories to copy, runs/<test> of a shard each
	for _, d := range dirs {
		sh, err := FindOne(d)
		if err != nil {
			return "", Result{}, err
		}
		linked, err := linkedRuns(sh)
		if err != nil {
			return "", Result{}, err
		}
		shards, runs = append(shards, sh), append(runs, linked...)
	}
	r, err := Merge(shards)
	if err != nil {
		return "", Result{}, err
	}
	dir, err := newSuiteDir(root, r.Suite, r.Started)
	if err != nil {
		return "", Result{}, err
	}
	for _, from := range runs {
		if err := os.CopyFS(filepath.Join(dir, runsDir, filepath.Base(from)), os.DirFS(from)); err != nil {
			return dir, r, fmt.Errorf("copy the runs of %s: %w", from, err)
		}
	}
	err = errors.Join(Write(dir, r), results.WriteIndex(filepath.Join(dir, runsDir), StoreTrends), results.WriteIndex(root, StoreTrends))
	return dir, r, err
}

// linkedRuns are the directories of the runs the shard's matrix links: for a report at
// runs/<test>/<time>/report.html, the shard's runs/<test>.
func linkedRuns(sh Record) ([]string, error) {
	var dirs []string
	for _, c := range sh.Result.Cells {
		for _, run := range c.Runs {
			if run.Report == "" {
				continue
			}
			under, rest, _ := strings.Cut(run.Report, "/")
			test, _, nested := strings.Cut(rest, "/")
			if under != runsDir || test == "" || !nested {
				return nil, errorf("%s: cell %s, seed %d: report %s is not in a run directory under %s/", sh.Dir, c.Cell.Name, run.Seed, run.Report, runsDir)
			}
			from := filepath.Join(sh.Dir, runsDir, test)
			if slices.Contains(dirs, from) {
				continue
			}
			if info, err := os.Stat(from); err != nil || !info.IsDir() {
				return nil, errorf("%s: the runs its matrix links are not there: no directory %s", sh.Dir, from)
			}
			dirs = append(dirs, from)
		}
	}
	return dirs, nil
}

// merges says whether r was merged from the shard run: in a store that keeps both, the
// shard's cells are shown once, in r.
func (r Result) merges(shard Result) bool {
	for _, m := range r.Merged {
		if r.Suite == shard.Suite && m.Shard == shard.Shard && m.Started.Equal(shard.Started) {
			return true
		}
	}
	return false
}
