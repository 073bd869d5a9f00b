package quote

import (
	"strings"
	"testing"
)

func TestShort(t *testing.T) {
	long := strings.Repeat("a", 102400)
	tests := []struct {
		name, value, want string
	}{
		{"empty", "", `""`},
		{"short", "aof-sometimes", `"aof-sometimes"`},
		{"escapes", "a\"b\x00\u202e", `"a\"b\x00\u202e"`},
		{"just short enough", strings.Repeat("a", limit), `"` + strings.Repeat("a", limit) + `"`},
		{"one byte too long", strings.Repeat("a", limit+1), `"` + strings.Repeat("a", limit) + `…" (201 bytes)`},
		{"100 KB", long, `"` + long[:limit] + `…" (102400 bytes)`},
		// Escapes count as what they print: 50 of \x00 is 200 characters, 51 too many.
		{"short bytes, long escapes", strings.Repeat("\x00", 51), `"` + strings.Repeat(`\x00`, 50) + `…" (51 bytes)`},
		{"an escape is not cut in two", "a" + strings.Repeat("\x00", 60), `"a` + strings.Repeat(`\x00`, 49) + `…" (61 bytes)`},
		{"a rune is not cut in two", "a" + strings.Repeat("é", 150), `"a` + strings.Repeat("é", 99) + `…" (301 bytes)`},
		{"invalid UTF-8", strings.Repeat("\xff", 300), `"` + strings.Repeat(`\xff`, 50) + `…" (300 bytes)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Short(tt.value); got != tt.want {
				t.Errorf("Short = %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestShortenAll(t *testing.T) {
	long := strings.Repeat("k", 102400)
	short := `"` + long[:limit] + `…" (102400 bytes)`
	tests := []struct {
		name, msg, want string
	}{
		{"short", `json: unknown field "k"`, `json: unknown field "k"`},
		{"a long quoted string", `json: unknown field "` + long + `"`, `json: unknown field ` + short},
		{"a long word", "json: cannot unmarshal number " + strings.Repeat("9", 300) + " into Go struct field Event.time of type int64",
			`json: cannot unmarshal number "` + strings.Repeat("9", limit) + `…" (300 bytes) into Go struct field Event.time of type int64`},
		{"several", `invalid value "` + long + `" for flag -ttl: parse error; ` + long,
			`invalid value ` + short + ` for flag -ttl: parse error; ` + short},
		{"a long message of short words", strings.Repeat(`"ab" cd `, 100), strings.Repeat(`"ab" cd `, 100)},
		{"an unclosed quote", `bad "` + long, `bad "\"` + long[:limit-2] + `…" (102401 bytes)`},
		{"shortened already", "line 1: unknown error kind " + short, "line 1: unknown error kind " + short},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShortenAll(tt.msg); got != tt.want {
				t.Errorf("ShortenAll = %.600s\nwant %.600s", got, tt.want)
			}
		})
	}
}
