package analysis

import (
	"encoding/json"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/story"
)

// tell gives every invalid lock-safety, data-safety and fencing result the story of the
// history's first overlap (package story), when mutual exclusion found one: the violations
// those checkers find follow from two clients holding the lock at once. The history file
// at path is read again, keeping only the events the story reads (story.Reads: the
// overlap's window, and the hazards about its two holders), so a soak's story takes no more
// memory than its overlap and its hazards.
//
// An invalid mutual exclusion never goes untold: should the events read fail to tell the
// overlap (the file changed or could not be read again), its story is mutual exclusion's
// own first line of evidence, which names both holders and when each held the lock.
func tell(path string, rs []checkers.Result, savedSpec json.RawMessage) error {
	var exclusion *checkers.Result
	for i, r := range rs {
		if r.Checker == checkers.MutualExclusion && r.Verdict == checkers.Invalid {
			exclusion = &rs[i]
		}
	}
	if exclusion == nil {
		return nil
	}
	var sentences []checkers.Sentence
	var err error
	if len(exclusion.Overlaps) > 0 {
		sentences, err = tellOverlap(path, exclusion.Overlaps[0], savedSpec)
	}
	if len(sentences) == 0 {
		sentences = untold(*exclusion)
	}
	for i, r := range rs {
		if r.Verdict == checkers.Invalid && told(r.Property) {
			rs[i].Story = sentences
		}
	}
	return err
}

// tellOverlap tells overlap o from the history file at path.
func tellOverlap(path string, o checkers.Overlap, savedSpec json.RawMessage) ([]checkers.Sentence, error) {
	var events []history.Event
	var start int64
	_, err := history.Scan(path, func(e history.Event) error {
		if e.Index == 0 {
			start = e.Time
		}
		if story.Reads(o, e) {
			events = append(events, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var s spec.Spec
	_ = json.Unmarshal(savedSpec, &s) // without its spec, a story tells no TTL
	return story.Tell(o, events, s.TTL.Std(), start), nil
}

// untold is the story of an invalid mutual exclusion whose overlap could not be told from
// the events: its first line of evidence, about its first overlap's later grant.
func untold(r checkers.Result) []checkers.Sentence {
	text := r.Summary
	if len(r.Evidence) > 0 {
		text = r.Evidence[0]
	}
	event := 0
	if len(r.Overlaps) > 0 {
		event = r.Overlaps[0].Later.Granted
	}
	return []checkers.Sentence{{Text: text + ".", Event: event}}
}

// told says whether a result of property p gets an overlap's story.
func told(p checkers.Property) bool {
	return p == checkers.PropertyLockSafety || p == checkers.PropertyDataSafety || p == checkers.PropertyFencing
}
