package analysis

import (
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/spec"
)

// Draw reads a saved history for its report's timeline as File reads it, so a soak's
// history is drawn in bounded memory (results.Drawing).
func Draw(path string) (*results.Drawing, error) {
	drawing := results.NewDrawing()
	_, err := history.Scan(path, func(e history.Event) error {
		drawing.Add(e)
		return nil
	})
	return drawing, err
}

// Report writes a judged run's report.html again from its summary and the drawing of its
// history, checking nothing. A run saved before results.json kept its command gets the
// one its spec says.
func Report(dir string, s results.Summary, d *results.Drawing) error {
	if s.Command == "" {
		s.Command = spec.ReproduceCommand(s.Spec)
	}
	return results.WriteReport(dir, s, d)
}
