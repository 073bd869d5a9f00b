package links

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
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

// Kleppmann's delayed packet: p0 reads under token 1 and sends its write; the network holds it
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
	if err := set.Slow(0, Reach{}, time.Millisecond, 0); err != nil {
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
	if err := set.Slow(0, Reach{}, latency, 0); err != nil {
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

// read is a read of "k" under token 1, with its error and how long it took to fail or pass.
func read(c *storage.Client, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	_, err := c.Do(ctx, storage.Request{Op: storage.OpRead, Key: "k", Token: token(1)})
	return time.Since(began), err
}

// ended says whether err is a connection's end as the client reads it: a reset, or a
// close before the answer.
func ended(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// A reset fails each request the client sends at once, on a connection made before it as on
// one made while it is on (which reads a TCP reset itself); the other slots' links carry on,
// and after Heal the client's new connections carry requests again.
func TestResetFailsWhatTheClientSendsAtOnceUntilHealed(t *testing.T) {
	set := openOnStorage(t, 2)
	before, other := dial(t, set, 0), dial(t, set, 1)
	if _, err := read(before, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := set.Break(0, Reach{}, Reset()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		conn *storage.Client
	}{{"a connection made before", before}, {"a connection made while reset", dial(t, set, 0)}} {
		took, err := read(c.conn, 5*time.Second)
		t.Logf("%s: %v after %s", c.name, err, took)
		if !ended(err) { // not the client's 5 s deadline: the proxy ended it
			t.Errorf("%s: a read failed after %s with %v; want the connection ended by the proxy", c.name, took, err)
		}
		if c.conn != before && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: %v, want a TCP reset", c.name, err)
		}
	}
	if _, err := read(other, time.Second); err != nil {
		t.Errorf("another slot's link, not reset: %v", err)
	}
	set.Heal()
	if _, err := read(dial(t, set, 0), time.Second); err != nil {
		t.Errorf("after Heal: %v", err)
	}
}

// Silence lets nothing through: a write gets no answer, the proxy closes its connection once
// the silence has lasted its time, and the write never reached the storage. Heal closes the
// connections it silenced; new ones carry requests again.
func TestSilenceDropsWhatTheClientSendsThenClosesItsConnection(t *testing.T) {
	set := openOnStorage(t, 1)
	silenced, idle := dial(t, set, 0), dial(t, set, 0)
	const closeAfter = 300 * time.Millisecond
	if err := set.Break(0, Reach{}, Silence(closeAfter)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	_, err := silenced.Do(ctx, storage.Request{Op: storage.OpWrite, Key: "k", Value: 9, Token: token(1)})
	if took := time.Since(began); !ended(err) || took < closeAfter { // ended: not the client's deadline
		t.Errorf("a write into the silence failed after %s with %v; want no answer, then the connection closed after %s",
			took, err, closeAfter)
	}
	set.Heal()
	if _, err := read(idle, time.Second); !ended(err) {
		t.Errorf("a connection silenced and healed: %v, want it closed", err)
	}
	after := dial(t, set, 0)
	if v, err := after.Do(ctx, storage.Request{Op: storage.OpRead, Key: "k", Token: token(1)}); err != nil || v != 0 {
		t.Errorf("after Heal: read %d, %v; want 0, the silenced write never having reached the storage", v, err)
	}
}

// A silence of no length keeps the connection open and unanswered until Heal: the client
// gives up on its own deadline.
func TestSilenceOfNoLengthLastsUntilHealed(t *testing.T) {
	set := openOnStorage(t, 1)
	c := dial(t, set, 0)
	if err := set.Break(0, Reach{}, Silence(0)); err != nil {
		t.Fatal(err)
	}
	// The silence has no end: a deadline of any length meets it.
	const deadline = 100 * time.Millisecond
	if took, err := read(c, deadline); !errors.Is(err, os.ErrDeadlineExceeded) || took < deadline {
		t.Errorf("a read into an endless silence failed after %s with %v; want the client's own deadline", took, err)
	}
	set.Heal()
	if _, err := read(dial(t, set, 0), time.Second); err != nil {
		t.Errorf("after Heal: %v", err)
	}
	if err := set.Break(0, Reach{}, Break{}); err == nil {
		t.Error("the zero Break was taken")
	}
}

// A fault reaching one node's link and its answers: a request to that node is applied at
// once and answered a latency later; a reach beyond the client's nodes is refused.
func TestSlowAnswersOfOneNode(t *testing.T) {
	set := twoNodes(t)
	const latency = 200 * time.Millisecond
	if err := set.Slow(0, Reach{Node: 1, Answers: true}, latency, 0); err != nil {
		t.Fatal(err)
	}
	if err := set.Slow(0, Reach{Node: 3}, latency, 0); err == nil {
		t.Error("a reach to node 3 of 2 was taken")
	}
	ctx := context.Background()
	n1, err := storage.Dial(ctx, set.Nodes(0)[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	resp, err := n1.Send(ctx, storage.Request{Op: storage.OpRead, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if answered := history.Now(); answered-resp.Applied < latency.Nanoseconds() {
		t.Errorf("n1 applied the read %s before its answer came, less than the answers' latency %s",
			time.Duration(answered-resp.Applied), latency)
	}
}

// A fault on the lock's links alone (LockOnly) slows every node's link and spares the
// storage's, so a holder it strikes still reads and writes in time.
func TestALockOnlyReachSparesTheStoragesLink(t *testing.T) {
	set := twoNodes(t)
	if err := set.Slow(0, Reach{Answers: true, LockOnly: true}, time.Second, 0); err != nil {
		t.Fatal(err)
	}
	ps := set.proxies[0]
	for i, p := range ps {
		slowed := p.Toxics.GetToxic(slowToxic+"-answers") != nil
		if storage := i == len(ps)-1; slowed == storage {
			t.Errorf("link %d of %d (the storage's is last) slowed: %t", i+1, len(ps), slowed)
		}
	}
}

// twoNodes is one client's links to two nodes and the storage, all three storage servers.
func twoNodes(t *testing.T) *Set {
	t.Helper()
	var addrs []string
	for range 3 {
		store, err := storage.Listen("127.0.0.1:0", false, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		addrs = append(addrs, store.Addr())
	}
	set, err := Open(netip.MustParseAddr("127.0.0.1"), 1, addrs[:2], addrs[2])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	return set
}
