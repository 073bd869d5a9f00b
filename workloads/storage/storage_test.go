package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
)

// syncBuffer is a log the server and the test can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) entries(t *testing.T) []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LogEntry
	dec := json.NewDecoder(bytes.NewReader(s.b.Bytes()))
	for dec.More() {
		var e LogEntry
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func token(v int64) *int64 { return &v }

type step struct {
	op       string
	value    int64
	token    *int64
	accepted bool
	reason   history.ErrorKind
	result   int64
}

func play(t *testing.T, fencing bool, steps []step) *syncBuffer {
	t.Helper()
	log := &syncBuffer{}
	s, err := Listen("127.0.0.1:0", fencing, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.Addr(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		got, err := c.Do(ctx, Request{Op: st.op, Key: "k", Value: st.value, Token: st.token})
		var rej *RejectedError
		switch {
		case st.accepted && err != nil:
			t.Fatalf("step %d (%s): %v, want accepted", i, st.op, err)
		case !st.accepted && (!errors.As(err, &rej) || rej.Reason != st.reason):
			t.Fatalf("step %d (%s): %v, want rejected %s", i, st.op, err, st.reason)
		case got != st.result:
			t.Fatalf("step %d (%s): value %d, want %d", i, st.op, got, st.result)
		}
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return log
}

func TestFencingRejectsLowerTokensOnReadsAndWrites(t *testing.T) {
	log := play(t, true, []step{
		{op: OpRead, token: token(33), accepted: true, result: 0},
		{op: OpRead, token: token(34), accepted: true, result: 0},
		{op: OpWrite, value: 1, token: token(34), accepted: true, result: 1},
		{op: OpWrite, value: 1, token: token(33), reason: history.ErrStaleToken, result: 1},
		{op: OpRead, token: token(33), reason: history.ErrStaleToken, result: 1},
		{op: OpWrite, value: 2, reason: history.ErrMissingToken},
		{op: OpWrite, value: 2, token: token(34), accepted: true, result: 2},
		{op: OpInspect, accepted: true, result: 2},
		{op: "delete", reason: history.ErrBadRequest},
	})
	entries := log.entries(t)
	if len(entries) != 9 {
		t.Fatalf("ground-truth log has %d entries, want 9", len(entries))
	}
	stale := entries[3]
	if stale.Accepted || stale.Reason != history.ErrStaleToken || stale.Highest == nil || *stale.Highest != 34 || *stale.Written != 1 {
		t.Errorf("stale write logged as %+v", stale)
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].Time < entries[i-1].Time {
			t.Errorf("log times go backwards at %d", i)
		}
	}
}

func TestWithoutFencingEverythingIsAccepted(t *testing.T) {
	play(t, false, []step{
		{op: OpWrite, value: 5, token: token(34), accepted: true, result: 5},
		{op: OpWrite, value: 1, token: token(33), accepted: true, result: 1},
		{op: OpWrite, value: 2, accepted: true, result: 2},
		{op: OpRead, accepted: true, result: 2},
	})
}

// Every answer says when the server applied or refused the request: the log's time, within
// the round trip, on the clock the history uses.
func TestAnswersSayWhenTheRequestWasApplied(t *testing.T) {
	log := &syncBuffer{}
	s, err := Listen("127.0.0.1:0", true, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.Addr(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var applied []int64
	for _, req := range []Request{
		{Op: OpWrite, Key: "k", Value: 1, Token: token(2)},
		{Op: OpRead, Key: "k", Token: token(1)}, // stale: refused, and said when
	} {
		before := history.Now()
		resp, err := c.Send(ctx, req)
		after := history.Now()
		var rej *RejectedError
		if err != nil && !errors.As(err, &rej) {
			t.Fatal(err)
		}
		if resp.Applied < before || resp.Applied > after {
			t.Errorf("%s applied at %d, outside its round trip [%d, %d]", req.Op, resp.Applied, before, after)
		}
		applied = append(applied, resp.Applied)
	}
	for i, e := range log.entries(t) {
		if e.Time != applied[i] {
			t.Errorf("log entry %d at %d, answer said %d", i, e.Time, applied[i])
		}
	}
}
