package history

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// decodeLines are lines a recorder writes and lines it never does, which the fast path
// must read as encoding/json does or leave to it.
var decodeLines = []string{
	`{"index":0,"type":"invoke","process":2,"f":"acquire","key":"k","time":1011626588}`,
	`{"index":1,"type":"ok","process":2,"f":"acquire","key":"k","token":1,"time":1012303392,"effect_from":1011626588}`,
	`{"index":4,"type":"ok","process":2,"f":"read","key":"k","value":-7,"time":1012827930,"effect_from":1012582447,"effect_to":1012582447}`,
	`{"index":9,"type":"fail","process":1,"f":"write","key":"k","time":5,"error":"stale-token","message":"token 3 < 4"}`,
	`{"index":3,"type":"info","process":-1,"f":"start","time":7,"fault":"pause-holder","targets":["worker-1","n2"],"detail":{"role":"primary","offset":"+2.000"}}`,
	`{"index":3,"type":"ok","process":0,"f":"acquire","time":7,"watch_events":3,"targets":[],"detail":{}}`,
	`{"index":5,"type":"info","process":-1,"f":"hazard","time":8,"fault":"failover","hazard":"grant-lost","targets":["worker-2"],"detail":{"grant":"#4"}}`,
	` { "index" : 1 , "type" : "ok" , "time" : 2 } `,
	`{}`,
	`{"index":1,"message":"héllo, wörld ✓"}`,
	// Left to encoding/json: escapes, null, other cases, duplicates, numbers it refuses
	// or reads otherwise, invalid UTF-8, trailing data.
	`{"index":1,"message":"a\"b"}`,
	`{"index":1,"value":null}`,
	`{"Index":1}`,
	`{"index":1,"index":2}`,
	`{"index":1.5}`,
	`{"index":1e3}`,
	`{"index":01}`,
	`{"index":-}`,
	`{"time":99999999999999999999}`,
	`{"index":1,"unknown":true}`,
	"{\"message\":\"\xff\"}",
	"{\"message\":\"a\tb\"}",
	`{"index":1}x`,
	`{"index":1,}`,
	`{"detail":{"a":1}}`,
	`{"targets":["a",2]}`,
	`[1]`,
	``,
}

func TestDecoderReadsAsEncodingJSON(t *testing.T) {
	lines := append([]string(nil), decodeLines...)
	seeds, _ := filepath.Glob("testdata/fuzz/FuzzParse/*")
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(b), "\n")...)
	}
	fast := 0
	for _, line := range lines {
		if sameAsJSON(t, []byte(line)) {
			fast++
		}
	}
	if fast < 10 {
		t.Errorf("the fast path read %d lines, want at least the 10 a recorder writes", fast)
	}
}

// FuzzDecoder: what the fast path reads, encoding/json reads the same.
func FuzzDecoder(f *testing.F) {
	for _, line := range decodeLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { sameAsJSON(t, line) })
}

// sameAsJSON fails t when the fast path reads line otherwise than encoding/json (as
// jsonEvent uses it, which also says whether the line has an index, and as it is), and
// says whether the fast path read it.
func sameAsJSON(t *testing.T, line []byte) bool {
	t.Helper()
	slow, slowIndexed, slowErr := jsonEvent(line)
	var plain Event
	if err := json.Unmarshal(line, &plain); (err == nil) != (slowErr == nil) || err == nil && !reflect.DeepEqual(plain, slow) {
		t.Errorf("%q: jsonEvent read %+v (%v), encoding/json %+v (%v)", line, slow, slowErr, plain, err)
	}
	var d decoder
	var fast Event
	ok, indexed := d.event(line, &fast)
	if !ok {
		return false
	}
	if slowErr != nil {
		t.Errorf("%q: the fast path read %+v, encoding/json refuses it: %v", line, fast, slowErr)
	} else if !reflect.DeepEqual(fast, slow) || indexed != slowIndexed {
		t.Errorf("%q: the fast path read %+v (index given: %v), encoding/json %+v (%v)", line, fast, indexed, slow, slowIndexed)
	}
	return true
}
