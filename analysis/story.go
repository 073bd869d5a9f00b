package analysis

import (
	"encoding/json"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/story"
)

// tell gives every invalid lock-safety, data-safety and fencing result the story of the history's
// first overlap (package story), when mutual exclusion found one: the violations those
// checkers find follow from two clients holding the lock at once. The history file at
// path is read again, keeping only the events the story reads (story.Reads: the overlap's
// window, and the hazards about its two holders), so a soak's story takes no more memory
// than its overlap and its hazards.
func tell(path string, rs []checkers.Result, savedSpec json.RawMessage) error {
	var first *checkers.Overlap
	for _, r := range rs {
		if r.Checker == "mutual-exclusion" && len(r.Overlaps) > 0 {
			first = &r.Overlaps[0]
		}
	}
	if first == nil {
		return nil
	}
	var window []history.Event
	var start int64
	_, err := history.Scan(path, func(e history.Event) error {
		if e.Index == 0 {
			start = e.Time
		}
		if story.Reads(*first, e) {
			window = append(window, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var s spec.Spec
	_ = json.Unmarshal(savedSpec, &s) // without its spec, a story tells no TTL
	sentences := story.Tell(*first, window, s.TTL.Std(), start)
	for i, r := range rs {
		if r.Verdict == checkers.Invalid && told(r.Property) {
			rs[i].Story = sentences
		}
	}
	return nil
}

// told says whether a result of property p gets an overlap's story.
func told(p checkers.Property) bool {
	return p == checkers.PropertyLockSafety || p == checkers.PropertyDataSafety || p == checkers.PropertyFencing
}
