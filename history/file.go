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

// Record numbers e, appends it to the file and returns it as written.
func (r *Recorder) Record(e Event) (Event, error) {
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
		err = fmt.Errorf("write history event %d: %w", e.Index, err)
		if r.err == nil {
			r.err = err
		}
		return e, err
	}
	r.next++
	r.events = append(r.events, e)
	for _, ch := range r.subs {
		select {
		case ch <- e:
		default:
		}
	}
	return e, nil
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

// ReadFile reads a history file.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	events, err := Parse(f)
	var ce *CorruptError
	if errors.As(err, &ce) {
		ce.Path = path
	}
	return events, err
}

// Parse parses JSON lines. A line that is not a valid event is a *CorruptError naming
// the line; a last line cut short by a crash is a corrupt line too, never silently dropped.
func Parse(r io.Reader) ([]Event, error) {
	var events []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, &CorruptError{Line: line, Reason: "not a JSON event: " + err.Error()}
		}
		if err := e.validate(); err != nil {
			return nil, &CorruptError{Line: line, Reason: err.Error()}
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	return events, nil
}

func (e Event) validate() error {
	switch e.Type {
	case Invoke, OK, Fail, Info:
	default:
		return fmt.Errorf("unknown event type %q", e.Type)
	}
	if e.Func == "" {
		return errors.New("event has no f")
	}
	if e.Time <= 0 {
		return errors.New("event has no time")
	}
	return nil
}
