package workloads

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/workloads/locksvc"
)

// The local lock client against an in-process lock service: no Docker needed.

func startLockService(t *testing.T, opts locksvc.Options) *locksvc.Server {
	t.Helper()
	s, err := locksvc.Listen("127.0.0.1:0", opts, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLocalLockIsAMutex(t *testing.T) {
	s := startLockService(t, locksvc.Options{})
	client, err := LookupClient("local")
	if err != nil {
		t.Fatal(err)
	}
	isAMutex(t, client, Config{Nodes: []string{s.Addr()}})
}

func TestLocalLock(t *testing.T) {
	t.Parallel() // a service of its own, waiting out a paused one's request timeout
	tests := []struct {
		name   string
		client string
		opts   locksvc.Options
		// run gets the service and two clients' locks on one key, with a one-minute TTL:
		// a holds it, by grant ga.
		run func(t *testing.T, s *locksvc.Server, a, b Lock, ga Grant)
	}{
		{name: "a clock jump expires the lease under the holder", client: "local",
			run: func(t *testing.T, s *locksvc.Server, a, b Lock, ga Grant) {
				s.SetClockOffset(2 * time.Minute)
				gb, err := acquire(b, time.Second)
				if err != nil {
					t.Fatalf("b could not take an expired lease: %v", err)
				}
				if gb.Token <= ga.Token {
					t.Errorf("tokens did not grow: a got %d, then b got %d", ga.Token, gb.Token)
				}
				if err := a.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
					t.Errorf("a released b's lock? got %v, want ErrNotHeld", err)
				}
			}},
		{name: "a paused service leaves outcomes unknown", client: "local",
			run: func(t *testing.T, s *locksvc.Server, a, b Lock, _ Grant) {
				s.Pause()
				// Each waits out its request's timeout: side by side, the two waits are one.
				released := make(chan error, 1)
				go func() { released <- a.Release(context.Background()) }()
				if _, err := acquire(b, time.Minute); err == nil || errors.Is(err, ErrBusy) {
					t.Errorf("acquire from a paused service: got %v, want an unknown outcome, never ErrBusy", err)
				}
				if err := <-released; err == nil || errors.Is(err, ErrNotHeld) {
					t.Errorf("release from a paused service: got %v, want an unknown outcome", err)
				}
				s.Resume()
				// The paused release may have been applied after all; either answer is definite.
				if err := a.Release(context.Background()); err != nil && !errors.Is(err, ErrNotHeld) {
					t.Errorf("release after Resume: %v, want a definite answer", err)
				}
			}},
		{name: "a broken service grants a held lock", client: "local-broken", opts: locksvc.Options{Broken: true},
			run: func(t *testing.T, s *locksvc.Server, a, b Lock, ga Grant) {
				gb, err := acquire(b, time.Second)
				if err != nil {
					t.Fatalf("b: %v, want the broken grant", err)
				}
				if !ga.HasToken || !gb.HasToken || gb.Token <= ga.Token {
					t.Errorf("grants %+v then %+v: want growing tokens", ga, gb)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startLockService(t, tt.opts)
			client, err := LookupClient(tt.client)
			if err != nil {
				t.Fatal(err)
			}
			target := Config{Nodes: []string{s.Addr()}}
			a, b := newLock(t, client, target, "a", time.Minute), newLock(t, client, target, "b", time.Minute)
			ga, err := acquire(a, time.Second)
			if err != nil {
				t.Fatalf("a: acquire a free lock: %v", err)
			}
			tt.run(t, s, a, b, ga)
		})
	}
}
