package history

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/lockbreaker/lockbreaker/internal/async"
	"github.com/lockbreaker/lockbreaker/internal/quote"
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
// to the kernel before Record returns, so a crashed run still leaves what it saw. It keeps
// no event: what it wrote is read back from the file (Scan), so a run of any length takes
// the same memory; it counts them (Tally) for a person watching.
// It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	f     *os.File
	w     *bufio.Writer
	next  int
	tally Tally
	subs  []chan<- Event
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
	r.tally.add(e)
	for _, ch := range r.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// Tally counts the events a recorder has written, for a progress line.
type Tally struct {
	Events int
	// OK, Fail and Info count the clients' and the harness's completions by their outcome.
	OK, Fail, Info int
	// Faults counts the faults started.
	Faults int
}

func (t *Tally) add(e Event) {
	t.Events++
	switch {
	case e.Process == NemesisProcess:
		if e.Func == Start {
			t.Faults++
		}
	case e.Type == OK:
		t.OK++
	case e.Type == Fail:
		t.Fail++
	case e.Type == Info:
		t.Info++
	}
}

// Tally returns the counts of everything recorded so far.
func (r *Recorder) Tally() Tally {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tally
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
	// Counting the lines first lets the events be held in one allocation of the right size,
	// not in a slice that doubles (and is copied) as it grows.
	lines, err := countLines(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return File{}, fmt.Errorf("read history: %w", err)
	}
	return parse(f, path, lines)
}

// countLines counts the newlines in r and a last line without one.
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 1<<20)
	n, last := 0, byte('\n')
	for {
		read, err := r.Read(buf)
		if read > 0 {
			n += bytes.Count(buf[:read], []byte{'\n'})
			last = buf[read-1]
		}
		if err == io.EOF {
			if last != '\n' {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// Parse reads JSON lines and refuses, as a *CorruptError naming the file line (blank lines
// count), what no recorder writes: an unknown type or f, a time outside (0, 2^62) (checkers
// add to and subtract times), a missing (absent or null) or duplicate index, and events that
// do not pair (see Pair).
// A history may end with operations never completed. Only a last line cut short by a crash
// (no newline and not JSON) is dropped, with File.Note saying so; the operation it would
// have completed stays open, which checkers count as indeterminate.
func Parse(r io.Reader) (File, error) {
	return parse(r, "", 0)
}

// parse reads the history; lines, when known, is how many lines it has.
func parse(r io.Reader, path string, lines int) (File, error) {
	var file File
	if lines > 0 {
		file.Events = make([]Event, 0, lines)
	}
	note, err := scan(r, path, func(e Event) error {
		file.Events = append(file.Events, e)
		return nil
	})
	if err != nil {
		return File{}, err
	}
	file.Note = note
	return file, nil
}

// Scan reads a history file as ReadFile does, but hands each event to visit as it is read
// and keeps none, so that a history larger than memory can be judged (checkers.Stream). It
// refuses what ReadFile refuses, after visit has seen the events before the bad line; the
// note is File.Note's. An error from visit stops the scan and is returned.
//
// The file is read, decoded and checked in a goroutine of its own, a few batches of events
// ahead of visit, so that on two cores reading overlaps what visit does with the events. A
// panic there is Scan's, as one in visit is.
func Scan(path string, visit func(Event) error) (note string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	batches := make(chan []Event, scanAhead)
	spent := make(chan []Event, scanAhead+1) // batches visited, to fill again
	stop := make(chan struct{})              // closed once visit is done, however it ends
	var readNote string
	var scanErr error
	reader := async.Go(func() {
		defer close(batches)
		batch := make([]Event, 0, scanBatch)
		send := func() error {
			select { // the select below may still pick a send once stopped
			case <-stop:
				return errScanStopped
			default:
			}
			select {
			case batches <- batch:
			case <-stop:
				return errScanStopped
			}
			select {
			case batch = <-spent:
				batch = batch[:0]
			default:
				batch = make([]Event, 0, scanBatch)
			}
			return nil
		}
		readNote, scanErr = scan(f, path, func(e Event) error {
			if batch = append(batch, e); len(batch) == scanBatch {
				return send()
			}
			return nil
		})
		if len(batch) > 0 { // the events before the end, or before a bad line
			send()
		}
	})
	defer func() { // even when visit panics: the reader is done with the file before it is closed
		close(stop)
		for range batches {
		}
		reader.Wait()
	}()
	for batch := range batches {
		for i := range batch {
			if err := visit(batch[i]); err != nil {
				return "", err
			}
		}
		select {
		case spent <- batch:
		default:
		}
	}
	return readNote, scanErr
}

// scanBatch is how many events Scan's reader hands over at once, and scanAhead how many
// batches it may read ahead of visit.
const scanBatch, scanAhead = 1024, 4

// errScanStopped stops Scan's reader once visit is done.
var errScanStopped = errors.New("history scan stopped")

// scan reads JSON lines, refusing what Parse refuses, and hands every event to visit.
func scan(r io.Reader, path string, visit func(Event) error) (note string, err error) {
	unterminated := false // the last line read had no newline
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 256<<10), maxLine) // large enough to read a file into straight, not through a second buffer
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		advance, token, err := bufio.ScanLines(data, atEOF)
		unterminated = advance > 0 && data[advance-1] != '\n'
		return advance, token, err
	})
	var indexes usedIndexes
	var d decoder
	p := pairing{name: func(line int) string { return fmt.Sprintf("line %d", line) }}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		e, indexed, err := d.decode(b)
		if err != nil {
			if unterminated {
				note = (&CorruptError{Path: path, Line: line,
					Reason: "last line cut short by a crash was dropped; the operation it would have completed counts as indeterminate"}).Error()
				break
			}
			// encoding/json shows a number it cannot take whole, however long.
			return "", &CorruptError{Path: path, Line: line, Reason: "not a JSON event: " + quote.ShortenAll(err.Error())}
		}
		// Empty lists read as absent, so an event reads back as it was written.
		if len(e.Targets) == 0 {
			e.Targets = nil
		}
		if len(e.Detail) == 0 {
			e.Detail = nil
		}
		if err := e.validate(); err != nil {
			return "", &CorruptError{Path: path, Line: line, Reason: err.Error()}
		}
		if !indexed {
			return "", &CorruptError{Path: path, Line: line, Reason: "event has no index"}
		}
		if first := indexes.use(e.Index, line); first != 0 {
			return "", &CorruptError{Path: path, Line: line, Reason: fmt.Sprintf("index %d already used on line %d", e.Index, first)}
		}
		if _, err := p.next(e, line); err != nil {
			return "", &CorruptError{Path: path, Line: line, Reason: err.Error()}
		}
		if err := visit(e); err != nil {
			return "", err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return "", &CorruptError{Path: path, Line: line + 1, Reason: fmt.Sprintf("line longer than %d MiB", maxLine>>20)}
		}
		return "", fmt.Errorf("read history: %w", err)
	}
	return note, nil
}

// usedIndexes remembers the line that used each index, in about a bit per event: a
// recorder numbers events 0, 1, 2... on lines 1, 2, 3..., so an index on its own line is
// only marked used (in a bitset), and any other is kept with its line in a map.
type usedIndexes struct {
	marked []uint64    // index i is used on line i+1
	moved  map[int]int // index -> its line, for the others
}

// use records that line uses index and returns the line that used it before, or 0.
func (u *usedIndexes) use(index, line int) (first int) {
	if first = u.moved[index]; first != 0 {
		return first
	}
	if index >= 0 && index/64 < len(u.marked) && u.marked[index/64]&(1<<(index%64)) != 0 {
		return index + 1
	}
	if index != line-1 {
		if u.moved == nil {
			u.moved = map[int]int{}
		}
		u.moved[index] = line
		return 0
	}
	if index/64 >= len(u.marked) {
		u.marked = append(u.marked, make([]uint64, index/64+1-len(u.marked))...)
	}
	u.marked[index/64] |= 1 << (index % 64)
	return 0
}

// decoder reads the lines a recorder writes (json.Marshal of an Event) several times
// faster than encoding/json, with the strings a history repeats (its types, functions,
// keys, faults) shared rather than allocated per event. It takes only what it reads
// exactly as json.Unmarshal would, and gives up on anything else (escapes, null, a key
// written in another case or twice, a number that is not a plain integer, invalid UTF-8),
// which json.Unmarshal then reads or refuses with its own words.
type decoder struct {
	b       []byte
	i       int
	strings map[string]string // strings seen as keys, faults and targets
	last    string            // the string shared last
	ints    []int64           // the places int64Pointer hands out next
}

// maxShared bounds the strings a decoder shares, so a hostile history cannot grow it.
const maxShared = 4096

// decode reads one line, by the fast path when it takes it, else by encoding/json.
// indexed says whether the line has an index: the first event's is 0, so only the field's
// absence tells an index that is missing.
func (d *decoder) decode(b []byte) (e Event, indexed bool, err error) {
	if ok, indexed := d.event(b, &e); ok {
		return e, indexed, nil
	}
	return jsonEvent(b)
}

// jsonEvent reads one line with encoding/json, as decode does.
func jsonEvent(b []byte) (e Event, indexed bool, err error) {
	var line struct {
		Event
		Index *int `json:"index"` // hides Event's: nil when the line has none, or null
	}
	if err := json.Unmarshal(b, &line); err != nil {
		return Event{}, false, err
	}
	if line.Index != nil {
		line.Event.Index = *line.Index
	}
	return line.Event, line.Index != nil, nil
}

// event decodes one line into e, which must be the zero Event, and says whether it had an
// index; false: use encoding/json.
func (d *decoder) event(b []byte, e *Event) (ok, indexed bool) {
	d.b, d.i = b, 0
	if !d.byte('{') {
		return false, false
	}
	var seen uint32
	if d.peek('}') {
		d.i++
		return d.end(), false
	}
	next := 0 // json.Marshal writes the fields in Event's order: the one after the last is looked at first
	for {
		field := d.markedField(next)
		if field < 0 {
			name, ok := d.rawString()
			if !ok || !d.byte(':') {
				return false, false
			}
			field = fieldNamed(name, next)
		}
		if field < 0 || seen&(1<<field) != 0 || !d.field(field, e) {
			return false, false
		}
		seen |= 1 << field
		next = field + 1
		if d.byte(',') {
			continue
		}
		return d.byte('}') && d.end(), seen&(1<<indexField) != 0
	}
}

// fieldNamed is where name is in eventFields, looked for from from on first; -1: nowhere.
func fieldNamed(name []byte, from int) int {
	for i := from; i < len(eventFields); i++ {
		if eventFields[i] == string(name) {
			return i
		}
	}
	for i := range min(from, len(eventFields)) {
		if eventFields[i] == string(name) {
			return i
		}
	}
	return -1
}

// markedField reads a field's name and its colon as json.Marshal writes them, when they
// are one of eventFields from from on, and says which; -1: read nothing.
func (d *decoder) markedField(from int) int {
	return d.marked(markedFields, from)
}

// marked reads the first of marks from from on that comes next, and says which; -1: read
// nothing.
func (d *decoder) marked(marks []mark, from int) int {
	rest := d.b[d.i:]
	if len(rest) < 8 {
		for i := from; i < len(marks); i++ {
			if bytes.HasPrefix(rest, marks[i].bytes) {
				d.i += len(marks[i].bytes)
				return i
			}
		}
		return -1
	}
	first := binary.LittleEndian.Uint64(rest)
	for i := from; i < len(marks); i++ {
		if m := &marks[i]; first&m.mask == m.first && (len(m.rest) == 0 || bytes.HasPrefix(rest[8:], m.rest)) {
			d.i += len(m.bytes)
			return i
		}
	}
	return -1
}

// mark is a string as json.Marshal writes it, which marked compares with what comes next
// eight bytes at once, as a word, and then the rest.
type mark struct {
	bytes       []byte
	first, mask uint64 // its first eight bytes (little-endian), and which of them it has
	rest        []byte // its bytes after those eight
}

// quoted are strings as json.Marshal writes them, each followed by after.
func quoted[T ~string](strings []T, after string) []mark {
	marks := make([]mark, len(strings))
	for i, s := range strings {
		m := mark{bytes: []byte(`"` + string(s) + `"` + after)}
		var word [8]byte
		n := copy(word[:], m.bytes)
		m.first, m.mask = binary.LittleEndian.Uint64(word[:]), ^uint64(0)>>(64-8*n)
		m.rest = m.bytes[n:]
		marks[i] = m
	}
	return marks
}

// markedFields are eventFields quoted and followed by a colon: `"index":`.
var markedFields = quoted(eventFields, ":")

// indexField is where "index" is in eventFields.
var indexField = slices.Index(eventFields, "index")

// eventFields are Event's JSON names, in its order, as field reads them.
var eventFields = []string{"index", "type", "process", "f", "key", "value", "token", "time", "effect_from", "effect_to",
	"error", "message", "watch_events", "fault", "targets", "hazard", "detail"}

// field reads the value of e's field eventFields[i].
func (d *decoder) field(i int, e *Event) (ok bool) {
	switch i {
	case 0:
		e.Index, ok = d.int()
	case 1:
		e.Type, ok = oneOf(d, types)
	case 2:
		e.Process, ok = d.int()
	case 3:
		e.Func, ok = oneOf(d, funcs)
	case 4:
		e.Key, ok = d.shared()
	case 5:
		e.Value, ok = d.int64Pointer()
	case 6:
		e.Token, ok = d.int64Pointer()
	case 7:
		e.Time, ok = d.int64()
	case 8:
		e.EffectFrom, ok = d.int64()
	case 9:
		e.EffectTo, ok = d.int64()
	case 10:
		e.Error, ok = oneOf(d, errorKindsKnown)
	case 11:
		e.Message, ok = oneOf(d, anyMessage)
	case 12:
		var v int
		v, ok = d.int()
		e.WatchEvents = Int(v)
	case 13:
		e.Fault, ok = d.shared()
	case 14:
		e.Targets, ok = d.targets()
	case 15:
		var h string
		h, ok = d.shared()
		e.Hazard = Hazard(h)
	case 16:
		e.Detail, ok = d.detail()
	}
	return ok
}

func (d *decoder) targets() ([]string, bool) {
	if !d.byte('[') {
		return nil, false
	}
	targets := []string{}
	if d.byte(']') {
		return targets, true
	}
	for {
		t, ok := d.shared()
		if !ok {
			return nil, false
		}
		targets = append(targets, t)
		if d.byte(',') {
			continue
		}
		return targets, d.byte(']')
	}
}

func (d *decoder) detail() (map[string]string, bool) {
	if !d.byte('{') {
		return nil, false
	}
	detail := map[string]string{}
	if d.byte('}') {
		return detail, true
	}
	for {
		k, ok := d.rawString()
		if !ok || !d.byte(':') {
			return nil, false
		}
		v, ok := d.rawString()
		if !ok {
			return nil, false
		}
		detail[string(k)] = string(v)
		if d.byte(',') {
			continue
		}
		return detail, d.byte('}')
	}
}

// known are the strings a field holds most, which oneOf reads without allocating them,
// with their marks (quoted).
type known[T ~string] struct {
	strings []T
	marks   []mark
}

func knowing[T ~string](strings ...T) known[T] {
	return known[T]{strings, quoted(strings, "")}
}

var (
	types           = knowing(Invoke, OK, Fail, Info)
	funcs           = knowing(Acquire, Release, Extend, Read, Write, FinalRead, Start, Stop, Roles, HazardFunc)
	errorKindsKnown = knowing(errorKinds...)
	anyMessage      = knowing[string]()
)

// oneOf reads a string, as one of those known when it is one, so that it takes no memory
// of its own.
func oneOf[T ~string](d *decoder, k known[T]) (T, bool) {
	d.space()
	if i := d.marked(k.marks, 0); i >= 0 {
		return k.strings[i], true
	}
	s, ok := d.rawString() // not one of k, which marked finds: rawString reads no escape
	return T(s), ok
}

// int64Pointer reads an integer into a pointer of its own, as encoding/json does: a place
// in a block of them the decoder hands out one by one, which costs a history one
// allocation for every intsBlock values, not one for each.
func (d *decoder) int64Pointer() (*int64, bool) {
	v, ok := d.int64()
	if len(d.ints) == 0 {
		d.ints = make([]int64, intsBlock)
	}
	p := &d.ints[0]
	d.ints = d.ints[1:]
	*p = v
	return p, ok
}

// intsBlock is how many values and tokens a decoder allocates at once.
const intsBlock = 512

// shared reads a string, shared with the same string read before.
func (d *decoder) shared() (string, bool) {
	s, ok := d.rawString()
	if !ok {
		return "", false
	}
	if string(s) == d.last { // a history's keys: mostly the one before
		return d.last, true
	}
	if v, ok := d.strings[string(s)]; ok {
		d.last = v
		return v, true
	}
	v := string(s)
	if len(d.strings) < maxShared {
		if d.strings == nil {
			d.strings = map[string]string{}
		}
		d.strings[v] = v
	}
	return v, true
}

func (d *decoder) space() {
	b, i := d.b, d.i // in locals, not reloaded through d at every byte
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	d.i = i
}

func (d *decoder) peek(c byte) bool {
	d.space()
	return d.i < len(d.b) && d.b[d.i] == c
}

// byte takes c, after any white space, if it comes next.
func (d *decoder) byte(c byte) bool {
	if d.peek(c) {
		d.i++
		return true
	}
	return false
}

// end is whether nothing but white space is left.
func (d *decoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// rawString reads a string with no escapes, no control characters and valid UTF-8: its
// bytes are its value.
func (d *decoder) rawString() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	ascii := true
	for ; d.i < len(d.b); d.i++ {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// int reads an integer that fits an int.
func (d *decoder) int() (int, bool) {
	v, ok := d.int64()
	return int(v), ok && int64(int(v)) == v
}

// eightDigits says whether the eight bytes of x (little-endian) are all ASCII digits:
// each is 0x30 to 0x3f, and adding 6 to it leaves it so (none is above '9').
func eightDigits(x uint64) bool {
	const high, threes = 0xf0f0f0f0f0f0f0f0, 0x3030303030303030
	return x&high == threes && (x+0x0606060606060606)&high == threes
}

// eightDigitsValue is the number eight ASCII digits (little-endian in x) write: pairs of
// digits, then of pairs, then of fours, combined by multiplication.
func eightDigitsValue(x uint64) uint64 {
	x -= 0x3030303030303030
	x = (x * 10) + (x >> 8)
	x = ((x & 0x000000FF000000FF) * (100 + (1000000 << 32))) + (((x >> 16) & 0x000000FF000000FF) * (1 + (10000 << 32)))
	return x >> 32
}

// int64 reads an integer as JSON writes it (no fraction, no exponent, no leading zero) of
// at most 18 digits, which no int64 overflows.
func (d *decoder) int64() (int64, bool) {
	d.space()
	b, i := d.b, d.i // in locals, not reloaded through d at every digit
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start, v := i, int64(0)
	for i+8 <= len(b) { // eight digits at a time (times have 10 to 19)
		x := binary.LittleEndian.Uint64(b[i:])
		if !eightDigits(x) {
			break
		}
		v, i = v*100_000_000+int64(eightDigitsValue(x)), i+8 // past 18 digits it is refused below
	}
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + int64(b[i]-'0')
	}
	d.i = i
	digits := i - start
	if digits == 0 || digits > 18 || digits > 1 && b[start] == '0' {
		return 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}
