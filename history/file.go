package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// FileName is the history's name inside a run's results directory.
const FileName = "history.jsonl"

// CorruptError says which line of a history file cannot be used, and why.
type CorruptError struct {
	Path   string
	Line   int
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("history line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Reason)
}

// Recorder appends events to a history file as they happen, one JSON line each, flushed
// to the kernel before Record returns, so a crashed run still leaves what it saw.
// It is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	next   int
	events []Event
	subs   []chan<- Event
	// err is the first failure to write: Close reports it, so a history with a gap is
	// never taken for a complete one.
	err error
}

// Create starts a new history file at path.
func Create(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	return &Recorder{f: f, w: bufio.NewWriter(f)}, nil
}

// Subscribe delivers every event recorded from now on to ch. Delivery never blocks the
// recorder: a subscriber that falls behind by the channel's capacity misses events.
func (r *Recorder) Subscribe(ch chan<- Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs = append(r.subs, ch)
}

// Record numbers e and appends it to the file. A failure to write is kept: Close reports
// it, so a history with a gap is never taken for a complete one, and the run goes on
// recording what it can.
func (r *Recorder) Record(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Index = r.next
	line, err := json.Marshal(e)
	if err == nil {
		r.w.Write(line)
		r.w.WriteByte('\n')
		err = r.w.Flush()
	}
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("write history event %d: %w", e.Index, err)
		}
		return
	}
	r.next++
	r.events = append(r.events, e)
	for _, ch := range r.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// Events returns a copy of everything recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Close syncs and closes the file. It also reports the first event that could not be
// written, since the history is then incomplete.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return r.err
	}
	err := errors.Join(r.err, r.w.Flush(), r.f.Sync(), r.f.Close())
	r.f = nil
	return err
}

// File is what a history file holds.
type File struct {
	Events []Event
	// Note is set when the file's last line was cut short by a crash and dropped, e.g.
	// "history.jsonl:57: last line cut short by a crash was dropped; ...". Callers put it
	// into the results so a reader knows the history ends early.
	Note string
}

// maxLine bounds one line, so a file that is not a history cannot exhaust memory.
const maxLine = 16 << 20

// ReadFile reads a history file; errors and the note name path.
func ReadFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	return parse(f, path)
}

// Parse reads JSON lines and refuses, as a *CorruptError naming the file line (blank lines
// count), what no recorder writes: an unknown type or f, a time outside (0, 2^62) (checkers
// add to and subtract times), a duplicate index, and events that do not pair (see Pair).
// A history may end with operations never completed. Only a last line cut short by a crash
// (no newline and not JSON) is dropped, with File.Note saying so; the operation it would
// have completed stays open, which checkers count as indeterminate.
func Parse(r io.Reader) (File, error) {
	return parse(r, "")
}

func parse(r io.Reader, path string) (File, error) {
	var file File
	unterminated := false // the last line read had no newline
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		advance, token, err := bufio.ScanLines(data, atEOF)
		unterminated = advance > 0 && data[advance-1] != '\n'
		return advance, token, err
	})
	indexLines := map[int]int{} // index -> line that used it
	p := pairing{name: func(line int) string { return fmt.Sprintf("line %d", line) }}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			if unterminated {
				file.Note = (&CorruptError{Path: path, Line: line,
					Reason: "last line cut short by a crash was dropped; the operation it would have completed counts as indeterminate"}).Error()
				break
			}
			return File{}, &CorruptError{Path: path, Line: line, Reason: "not a JSON event: " + err.Error()}
		}
		// Empty lists read as absent, so an event reads back as it was written.
		if len(e.Targets) == 0 {
			e.Targets = nil
		}
		if len(e.Detail) == 0 {
			e.Detail = nil
		}
		if err := e.validate(); err != nil {
			return File{}, &CorruptError{Path: path, Line: line, Reason: err.Error()}
		}
		if first, dup := indexLines[e.Index]; dup {
			return File{}, &CorruptError{Path: path, Line: line, Reason: fmt.Sprintf("index %d already used on line %d", e.Index, first)}
		}
		indexLines[e.Index] = line
		if _, err := p.next(e, line); err != nil {
			return File{}, &CorruptError{Path: path, Line: line, Reason: err.Error()}
		}
		file.Events = append(file.Events, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return File{}, &CorruptError{Path: path, Line: line + 1, Reason: fmt.Sprintf("line longer than %d MiB", maxLine>>20)}
		}
		return File{}, fmt.Errorf("read history: %w", err)
	}
	return file, nil
}
