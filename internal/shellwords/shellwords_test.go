package shellwords

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		line string
		want []string
		bad  bool
	}{
		{line: "python3 mylock.py", want: []string{"python3", "mylock.py"}},
		{line: "  python3\t-u   lock.py  ", want: []string{"python3", "-u", "lock.py"}},
		{line: `python3 "my lock.py"`, want: []string{"python3", "my lock.py"}},
		{line: `python3 'my "lock".py'`, want: []string{"python3", `my "lock".py`}},
		{line: `a\ b "c\"d" 'e'f`, want: []string{"a b", `c"d`, "ef"}},
		{line: `"a\nb" $HOME`, want: []string{`a\nb`, "$HOME"}},
		{line: `''`, want: []string{""}},
		{line: "", want: nil},
		{line: "python3 'lock.py", bad: true},
		{line: `python3 "lock.py`, bad: true},
		{line: `python3 lock.py\`, bad: true},
	}
	for _, c := range cases {
		got, err := Split(c.line)
		switch {
		case c.bad && err == nil:
			t.Errorf("Split(%q) = %q, want an error", c.line, got)
		case !c.bad && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("Split(%q) = %q, %v; want %q", c.line, got, err, c.want)
		}
	}
}

// What Join writes, Split reads back word for word.
func TestJoinSplitRoundTrip(t *testing.T) {
	for _, words := range [][]string{
		{"python3", "examples/python/redispy_lock.py"},
		{"sh", "-c", `read cfg; echo '{"result":"ready"}'`},
		{"it's", "a b", "", `back\slash`, "$x", "tab\there", "new\nline"},
	} {
		line := Join(words)
		got, err := Split(line)
		if err != nil || !slices.Equal(got, words) {
			t.Errorf("Split(Join(%q)) = Split(%s) = %q, %v", words, line, got, err)
		}
	}
}
