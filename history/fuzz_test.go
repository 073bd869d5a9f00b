package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics, a refusal names a real, non-blank line of the input, and
// whatever Parse accepts writes back and reads back as the same events, which pair.
// Seeds are in testdata/fuzz/FuzzParse; `make fuzz` runs it.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(bytes.NewReader(data))
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("refusal is not a *CorruptError: %v", err)
			}
			lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
			if ce.Line < 1 || ce.Line > len(lines) {
				t.Fatalf("%v names line %d of %d", err, ce.Line, len(lines))
			}
			if len(bytes.TrimSuffix(lines[ce.Line-1], []byte("\r"))) == 0 {
				t.Fatalf("%v names a blank line", err)
			}
			return
		}
		if file.Note != "" && bytes.HasSuffix(data, []byte("\n")) {
			t.Fatalf("a line was dropped from a file that ends with a newline: %s", file.Note)
		}
		var written bytes.Buffer
		for _, e := range file.Events {
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatalf("encode %+v: %v", e, err)
			}
			written.Write(b)
			written.WriteByte('\n')
		}
		again, err := Parse(&written)
		if err != nil {
			t.Fatalf("accepted events do not read back: %v\n%s", err, written.Bytes())
		}
		if again.Note != "" || !reflect.DeepEqual(again.Events, file.Events) {
			t.Fatalf("events changed on the way back:\n%+v\n%+v", file.Events, again.Events)
		}
		if _, err := Pair(file.Events); err != nil {
			t.Fatalf("accepted events do not pair: %v", err)
		}
	})
}
