package locksvc

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// entries reads a ground-truth log. Read it only after Close: the service writes it
// until then.
func entries(t *testing.T, log *bytes.Buffer) []LogEntry {
	t.Helper()
	var out []LogEntry
	for line := range bytes.Lines(log.Bytes()) {
		var e LogEntry
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

func start(t *testing.T, opts Options) (*Server, *bytes.Buffer) {
	t.Helper()
	log := &bytes.Buffer{}
	s, err := Listen("127.0.0.1:0", opts, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, log
}

// do sends req on a fresh client, with a deadline that only a hung service reaches.
func do(t *testing.T, s *Server, req Request) (Response, error) {
	t.Helper()
	c := NewClient(s.Addr())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Do(ctx, req)
}

const minute = 60_000 // ms

type step struct {
	op, key, owner string
	ttlMs          int64
	// clock, when set, is the service's clock offset from this step on.
	clock  time.Duration
	want   Response
	holder string
}

func TestLeases(t *testing.T) {
	tests := []struct {
		name   string
		broken bool
		steps  []step
	}{
		{name: "correct", steps: []step{
			{op: OpAcquire, owner: "a", ttlMs: minute, want: Response{OK: true, Token: 1}, holder: "a"},
			{op: OpAcquire, owner: "b", ttlMs: minute, want: Response{Reason: RefuseBusy}, holder: "a"},
			{op: OpAcquire, owner: "a", ttlMs: minute, want: Response{Reason: RefuseBusy}, holder: "a"},
			{op: OpRelease, owner: "b", want: Response{Reason: RefuseNotHeld}, holder: "a"},
			{op: OpRelease, owner: "a", want: Response{OK: true}},
			{op: OpRelease, owner: "a", want: Response{Reason: RefuseNotHeld}},
			{op: OpAcquire, owner: "b", ttlMs: minute, want: Response{OK: true, Token: 2}, holder: "b"},
			{op: OpAcquire, key: "other", owner: "c", ttlMs: minute, want: Response{OK: true, Token: 1}, holder: "c"},
			// The clock jumps past b's lease: a gets the lock, b cannot release it.
			{op: OpAcquire, owner: "a", ttlMs: minute, clock: 61 * time.Second, want: Response{OK: true, Token: 3}, holder: "a"},
			{op: OpRelease, owner: "b", want: Response{Reason: RefuseNotHeld}, holder: "a"},
			// A jump back lengthens a's lease, as it would on Redis.
			{op: OpAcquire, owner: "b", ttlMs: minute, clock: -time.Hour, want: Response{Reason: RefuseBusy}, holder: "a"},
			{op: OpAcquire, owner: "b", ttlMs: minute, clock: time.Hour, want: Response{OK: true, Token: 4}, holder: "b"},
			{op: OpAcquire, owner: "c", want: Response{Reason: RefuseBadRequest}, holder: "b"},
			{op: "steal", owner: "c", want: Response{Reason: RefuseBadRequest}, holder: "b"},
			{op: OpRelease, want: Response{Reason: RefuseBadRequest}, holder: "b"},
		}},
		{name: "broken", broken: true, steps: []step{
			{op: OpAcquire, owner: "a", ttlMs: minute, want: Response{OK: true, Token: 1}, holder: "a"},
			{op: OpAcquire, owner: "b", ttlMs: minute, want: Response{OK: true, Token: 2}, holder: "b"},
			{op: OpRelease, owner: "a", want: Response{Reason: RefuseNotHeld}, holder: "b"},
			{op: OpRelease, owner: "b", want: Response{OK: true}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, log := start(t, Options{Broken: tt.broken})
			for i, st := range tt.steps {
				if st.clock != 0 {
					s.SetClockOffset(st.clock)
				}
				if st.key == "" {
					st.key = "k"
				}
				got, err := do(t, s, Request{Op: st.op, Key: st.key, Owner: st.owner, TTLms: st.ttlMs})
				if err != nil {
					t.Fatalf("step %d (%s by %s): %v", i, st.op, st.owner, err)
				}
				if got != st.want {
					t.Errorf("step %d (%s by %s): %+v, want %+v", i, st.op, st.owner, got, st.want)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			logged := entries(t, log)
			if len(logged) != len(tt.steps) {
				t.Fatalf("ground-truth log has %d entries, want %d", len(logged), len(tt.steps))
			}
			for i, e := range logged {
				st := tt.steps[i]
				if e.Op != st.op || e.Owner != st.owner || e.Response != st.want || e.Holder != st.holder {
					t.Errorf("log entry %d: %+v, want %s by %s answered %+v, holder %q", i, e, st.op, st.owner, st.want, st.holder)
				}
				if i > 0 && e.Time < logged[i-1].Time {
					t.Errorf("log times go backwards at %d", i)
				}
			}
		})
	}
}

// A lease also runs out with real time, no clock fault needed.
func TestLeaseExpiresWithTime(t *testing.T) {
	s, _ := start(t, Options{})
	if got, err := do(t, s, Request{Op: OpAcquire, Key: "k", Owner: "a", TTLms: 1}); err != nil || !got.OK {
		t.Fatalf("a: %+v, %v", got, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := do(t, s, Request{Op: OpAcquire, Key: "k", Owner: "b", TTLms: minute})
		if err != nil {
			t.Fatal(err)
		}
		if got.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's 1 ms lease still runs after 10 s: %+v", got)
		}
	}
}

// pausedRequest pauses s and sends an acquire to it; it returns once the request waits
// in the service unanswered, and the channel gives the request's outcome.
func pausedRequest(t *testing.T, s *Server) <-chan error {
	t.Helper()
	waiting := make(chan struct{})
	s.mu.Lock()
	s.onWait = func() { close(waiting) }
	s.mu.Unlock()
	s.Pause()
	done := make(chan error, 1)
	go func() {
		_, err := do(t, s, Request{Op: OpAcquire, Key: "k", Owner: "a", TTLms: minute})
		done <- err
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("a paused service answered (%v)", err)
	}
	return done
}

func TestPauseHoldsRequestsUntilResume(t *testing.T) {
	s, log := start(t, Options{})
	done := pausedRequest(t, s)
	s.Resume()
	if err := <-done; err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if e := entries(t, log); len(e) != 1 || !e[0].OK {
		t.Fatalf("ground-truth log %+v, want the one granted acquire", e)
	}
}

func TestCloseWhilePaused(t *testing.T) {
	s, _ := start(t, Options{})
	done := pausedRequest(t, s)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs while the service is paused")
	}
	if err := <-done; err == nil {
		t.Error("a request to a service closed while paused was answered")
	}
}
