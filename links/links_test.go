package links

import (
	"context"
	"io"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// openOnStorage starts a storage (fencing on, so a late stale write is rejected) and the
// proxies of slots clients to it, with no nodes.
func openOnStorage(t *testing.T, slots int) *Set {
	t.Helper()
	store, err := storage.Listen("127.0.0.1:0", true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	set, err := Open(netip.MustParseAddr("127.0.0.1"), slots, nil, store.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	return set
}

func dial(t *testing.T, set *Set, slot int) *storage.Client {
	t.Helper()
	c, err := storage.Dial(context.Background(), set.Storage(slot), slot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func token(n int64) *int64 { return &n }

// The seed's delayed write: p0 reads under token 1 and sends its write; the network holds it
// while p1, granted token 2, reads and writes; delivered then, the storage rejects it.
func TestAHeldWriteArrivesAfterTheNextHoldersWrite(t *testing.T) {
	set := openOnStorage(t, 2)
	p0, p1 := dial(t, set, 0), dial(t, set, 1)
	ctx := context.Background()
	hold, err := set.HoldNextWrite()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p0.Do(ctx, storage.Request{Op: storage.OpRead, Key: "k", Token: token(1), Client: 0}); err != nil {
		t.Fatalf("a read passes an armed link: %v", err)
	}
	late := make(chan storage.Response, 1)
	go func() {
		// Rejected or not, the answer says when the storage applied it.
		r, _ := p0.Send(ctx, storage.Request{Op: storage.OpWrite, Key: "k", Value: 1, Token: token(1), Client: 0})
		late <- r
	}()
	held := <-hold.Caught()
	if held.Process != 0 || held.Value != 1 {
		t.Fatalf("caught %+v, want p0's write of 1", held)
	}
	if _, err := p1.Do(ctx, storage.Request{Op: storage.OpRead, Key: "k", Token: token(2), Client: 1}); err != nil {
		t.Fatal(err)
	}
	next, err := p1.Send(ctx, storage.Request{Op: storage.OpWrite, Key: "k", Value: 1, Token: token(2), Client: 1})
	if err != nil || !next.Accepted {
		t.Fatalf("the next holder's write on another link: %+v, %v", next, err)
	}
	hold.Release()
	got := <-late
	if got.Accepted || got.Reason == "" {
		t.Fatalf("the held write, delivered late, was answered %+v; want rejected as stale", got)
	}
	if got.Applied <= next.Applied {
		t.Errorf("the held write reached the storage at %d, before the next holder's at %d", got.Applied, next.Applied)
	}
	// Released, the link carries what follows at once, and a hold is not armed again.
	if _, err := p0.Do(ctx, storage.Request{Op: storage.OpRead, Key: "k", Token: token(3), Client: 0}); err != nil {
		t.Fatal(err)
	}
}

// heldWrite is one client's write caught by an armed hold; done gets the answer's error.
func heldWrite(t *testing.T) (*Set, *Hold, <-chan error) {
	t.Helper()
	set := openOnStorage(t, 1)
	p0 := dial(t, set, 0)
	hold, err := set.HoldNextWrite()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p0.Do(context.Background(), storage.Request{Op: storage.OpWrite, Key: "k", Value: 7, Token: token(1), Client: 0})
		done <- err
	}()
	<-hold.Caught()
	return set, hold, done
}

// Heal delivers a held write: no request is lost in the network at the end of a run.
func TestHealDeliversAHeldWrite(t *testing.T) {
	set, hold, done := heldWrite(t)
	set.Heal()
	if err := <-done; err != nil {
		t.Fatalf("a write held at the heal: %v", err)
	}
	hold.Release() // idempotent after Heal
}

// Another toxic added behind a hold restarts it; what it holds stays held.
func TestAHoldSurvivesASlowdownAddedBehindIt(t *testing.T) {
	set, hold, done := heldWrite(t)
	if err := set.Slow(0, time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the held write was answered (%v) when a slowdown was added, before its release", err)
	default:
	}
	hold.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Slow makes every request on the slot's links take at least the latency.
func TestSlowDelaysWhatTheClientSends(t *testing.T) {
	set := openOnStorage(t, 2)
	p0, p1 := dial(t, set, 0), dial(t, set, 1)
	const latency = 200 * time.Millisecond
	if err := set.Slow(0, latency, 0); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := storage.Request{Op: storage.OpRead, Key: "k", Token: token(1)}
	began := time.Now()
	if _, err := p0.Do(ctx, read); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < latency {
		t.Errorf("a read on a slowed link took %s, less than its latency %s", took, latency)
	}
	set.Heal()
	// Healed and unslowed links carry requests; their speed is the machine's, not asserted.
	for _, c := range []*storage.Client{p0, p1} {
		if _, err := c.Do(ctx, read); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEachSlotHasProxiesOfItsOwn(t *testing.T) {
	set, err := Open(netip.MustParseAddr("127.0.0.1"), 2, []string{"10.0.0.2:6379", "10.0.0.3:6379"}, "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	nodes := set.Nodes(1)
	if len(nodes) != 2 || nodes[0] == set.Nodes(0)[0] || set.Storage(1) == set.Storage(0) || slices.Contains(nodes, set.Storage(1)) {
		t.Fatalf("slot 1 dials %v and %s, slot 0 %v and %s; want proxies of its own", nodes, set.Storage(1), set.Nodes(0), set.Storage(0))
	}
}
