package jsonl

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

type echo struct {
	N int `json:"n"`
}

// An answer per request, in order; a handler that hangs up leaves the caller an error and
// a closed connection; Close ends every connection.
func TestRoundTripsAndHangUps(t *testing.T) {
	s, err := Listen("127.0.0.1:0", func(line []byte) (any, bool) {
		var req echo
		if json.Unmarshal(line, &req) != nil || req.N < 0 {
			return nil, false
		}
		return echo{N: req.N * 2}, true
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := Dial(ctx, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		var got echo
		if err := c.RoundTrip(ctx, echo{N: n}, &got); err != nil || got.N != 2*n {
			t.Fatalf("round trip %d: %+v, %v", n, got, err)
		}
	}
	var got echo
	if err := c.RoundTrip(ctx, echo{N: -1}, &got); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("hang-up: %v, want unexpected EOF", err)
	}
	if err := c.RoundTrip(ctx, echo{N: 1}, &got); err == nil {
		t.Error("a closed connection still answered")
	}
	other, err := Dial(ctx, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.RoundTrip(ctx, echo{N: 1}, &got); err == nil {
		t.Error("a connection outlived Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
