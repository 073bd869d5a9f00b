package command

import (
	"errors"
	"flag"
	"slices"
	"testing"
)

// Flags stand anywhere among a command's arguments; "--" ends them, and "--" given as a
// flag's value is a value, not the end.
func TestParseArgsTakesFlagsAnywhere(t *testing.T) {
	for _, tt := range []struct {
		name      string
		args      []string
		rest      []string
		results   string
		list      bool
		confirm   int
		wantError bool
	}{
		{"flags first", []string{"--results", "out", "--list", "run"}, []string{"run"}, "out", true, 1, false},
		{"flags last", []string{"run", "--results", "out", "--list"}, []string{"run"}, "out", true, 1, false},
		{"flags between", []string{"a", "--confirm=3", "b", "-list", "c"}, []string{"a", "b", "c"}, "", true, 3, false},
		{"a boolean before an argument", []string{"--list", "a", "--results", "out"}, []string{"a"}, "out", true, 1, false},
		{"dashes end the flags", []string{"--list", "--", "--results", "out"}, []string{"--results", "out"}, "", true, 1, false},
		{"dashes after an argument", []string{"a", "--confirm", "2", "--", "-b"}, []string{"a", "-b"}, "", false, 2, false},
		{"dashes as a value", []string{"--results", "--", "a", "--list"}, []string{"a"}, "--", true, 1, false},
		{"a lone dash is an argument", []string{"-", "--list"}, []string{"-"}, "", true, 1, false},
		{"an unknown flag after an argument", []string{"a", "--colour", "red"}, nil, "", false, 1, true},
		{"a missing value after an argument", []string{"a", "--results"}, nil, "", false, 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs := NewFlags("t")
			results := fs.String("results", "", "")
			list := fs.Bool("list", false, "")
			confirm := fs.Int("confirm", 1, "")
			rest, err := ParseArgs(fs, tt.args)
			if tt.wantError {
				var bad BadInput
				if !errors.As(err, &bad) {
					t.Fatalf("got %v, want a BadInput", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rest, tt.rest) || *results != tt.results || *list != tt.list || *confirm != tt.confirm {
				t.Errorf("arguments %q, --results %q, --list %v, --confirm %d; want %q, %q, %v, %d",
					rest, *results, *list, *confirm, tt.rest, tt.results, tt.list, tt.confirm)
			}
		})
	}
}

// -h after an argument asks for help as before one; Parse refuses an argument wherever the
// flags are.
func TestParseHelpAndStrayArguments(t *testing.T) {
	if _, err := ParseArgs(NewFlags("t"), []string{"run", "-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run -h: got %v, want flag.ErrHelp", err)
	}
	fs := NewFlags("t")
	fs.Int("clients", 5, "")
	err := Parse(fs, []string{"--clients", "3", "redis", "--clients", "4"})
	if err == nil || err.Error() != `t: unexpected argument "redis"` {
		t.Errorf("got %v, want the stray argument refused", err)
	}
}
