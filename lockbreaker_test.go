package lockbreaker

import (
	"context"
	"strings"
	"testing"
)

type nopLock struct{}

func (nopLock) Acquire(context.Context) (Grant, error) { return Grant{}, ErrBusy }
func (nopLock) Release(context.Context) error          { return ErrNotHeld }
func (nopLock) Close() error                           { return nil }

func newNop(Config) (Lock, error) { return nopLock{}, nil }

// Register refuses what would make a user's client unusable or ambiguous, each with a
// reason.
func TestRegister(t *testing.T) {
	tests := []struct {
		name   string
		client Client
		want   string // "" when it must be accepted
	}{
		{"a new lock", Client{Name: "mylock-ok", Systems: []string{"redis"}, Tokens: true, New: newNop}, ""},
		{"no tokens, with the reason", Client{Name: "mylock-notokens", Systems: []string{"redlock"}, NoTokens: "it has none", New: newNop}, ""},
		{"a taken name", Client{Name: "redis", Systems: []string{"redis"}, Tokens: true, New: newNop}, "the name is taken"},
		{"no name", Client{Systems: []string{"redis"}, Tokens: true, New: newNop}, "a name is a printable word"},
		{"a name a list would split", Client{Name: "my,lock", Systems: []string{"redis"}, Tokens: true, New: newNop}, "without spaces, commas or slashes"},
		{"no system", Client{Name: "mylock-1", Tokens: true, New: newNop}, "name the systems it runs on"},
		{"an unknown system", Client{Name: "mylock-2", Systems: []string{"etcd"}, Tokens: true, New: newNop}, `unknown system "etcd"`},
		{"no constructor", Client{Name: "mylock-3", Systems: []string{"redis"}, Tokens: true}, "no New function"},
		{"no tokens, no reason", Client{Name: "mylock-4", Systems: []string{"redis"}, New: newNop}, "say why its grants carry no fencing token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Register(tt.client)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
