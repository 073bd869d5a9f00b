package analysis

import (
	"errors"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
)

// Draw reads a saved history for its report as File reads it, so a soak's history is
// drawn in bounded memory (results.Drawing).
func Draw(path string) (*results.Drawing, error) {
	drawing := results.NewDrawing()
	_, err := history.Scan(path, func(e history.Event) error {
		drawing.Add(e)
		return nil
	})
	if err == nil {
		drawing.Events, err = timeline(path, drawing.Total)
	}
	return drawing, err
}

// timeline reads again the first results.TimelineEvents events of the history at path,
// of its total, which the report's timeline is drawn from (results.Drawing).
func timeline(path string, total int) ([]history.Event, error) {
	events := make([]history.Event, 0, min(total, results.TimelineEvents))
	_, err := history.Scan(path, func(e history.Event) error {
		if len(events) == cap(events) {
			return errTimelineRead
		}
		events = append(events, e)
		return nil
	})
	if errors.Is(err, errTimelineRead) {
		err = nil
	}
	return events, err
}

// errTimelineRead stops timeline's reading once it has its events.
var errTimelineRead = errors.New("the timeline's events are read")

// Report writes a judged run's report.html again from its summary and the drawing of its
// history, checking nothing. A run saved before results.json kept its command gets the
// one its spec says.
func Report(dir string, s results.Summary, d *results.Drawing) error {
	if s.Command == "" {
		s.Command = spec.ReproduceCommand(s.Spec)
	}
	return results.WriteReport(dir, s, d)
}
