package analysis

import (
	"encoding/json"
	"errors"

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
	return tellRead(path, rs, savedSpec, nil)
}

// read is what File saw of a history as it judged it, which spares tell reading all of it
// again: whether every event's index was its place in the file, and the nemesis's events
// (every hazard among them), in the file's order.
type read struct {
	inOrder bool
	nemesis []history.Event
}

// tellRead is tell, reading the history again only as far as the overlap's window when r
// says where that ends (see tellOverlap); r nil: the whole history.
func tellRead(path string, rs []checkers.Result, savedSpec json.RawMessage, r *read) error {
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
		sentences, err = tellOverlap(path, exclusion.Overlaps[0], savedSpec, r)
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

// tellOverlap tells overlap o from the history file at path. When r says every event's
// index is its place in the file, the file is read only to the end of the overlap's window
// (story.Window): what the story reads after it can only be hazards, which are the
// nemesis's events r holds, so they are taken from r in the file's order.
func tellOverlap(path string, o checkers.Overlap, savedSpec json.RawMessage, r *read) ([]checkers.Sentence, error) {
	var events []history.Event
	var start int64
	_, to := story.Window(o)
	partly := r != nil && r.inOrder
	_, err := history.Scan(path, func(e history.Event) error {
		if e.Index == 0 {
			start = e.Time
		}
		if story.Reads(o, e) {
			events = append(events, e)
		}
		if partly && e.Index >= to {
			return errWindowRead
		}
		return nil
	})
	switch {
	case errors.Is(err, errWindowRead):
		for _, e := range r.nemesis {
			if e.Index > to && story.Reads(o, e) {
				events = append(events, e)
			}
		}
	case err != nil:
		return nil, err
	}
	var s spec.Spec
	_ = json.Unmarshal(savedSpec, &s) // without its spec, a story tells no TTL
	return story.Tell(o, events, s.TTL.Std(), start), nil
}

// errWindowRead stops tellOverlap's reading at the end of the overlap's window.
var errWindowRead = errors.New("the overlap's window is read")

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
