package links

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// Held is the storage write an armed Hold caught: whose (the process its request names),
// its value, and when the proxy caught it (history.Now).
type Held struct {
	Process int
	Value   int64
	At      int64
}

// Hold is one arming of every slot's storage link: the first write request a client sends
// after it is held in the network, with everything sent after it on that link, until
// Release; every other link passes its traffic as before.
type Hold struct {
	set      *Set
	id       string
	claimed  atomic.Bool
	caught   chan Held
	released chan struct{}
	once     sync.Once
}

// holds are the armed holds by id, which is all a toxic's attributes can carry.
var (
	holds   sync.Map
	holdIDs atomic.Int64
)

// HoldNextWrite arms every slot's storage link to hold the next write its client sends;
// Caught tells the first, and Release lets it go.
func (s *Set) HoldNextWrite() (*Hold, error) {
	h := &Hold{set: s, id: fmt.Sprint(holdIDs.Add(1)), caught: make(chan Held, 1), released: make(chan struct{})}
	holds.Store(h.id, h)
	s.mu.Lock()
	s.holds = append(s.holds, h)
	s.mu.Unlock()
	var errs []error
	for _, ps := range s.proxies {
		errs = append(errs, addToxic(ps[len(ps)-1], holdToxic, holdType, "upstream", fmt.Sprintf(`{"hold":%q}`, h.id)))
	}
	if err := errors.Join(errs...); err != nil {
		h.Release()
		return nil, err
	}
	return h, nil
}

// Caught gets the write this hold caught, once it has.
func (h *Hold) Caught() <-chan Held { return h.caught }

// Release delivers what the hold holds, in the order it was sent, and takes the arming back
// from every link. It is idempotent.
func (h *Hold) Release() {
	h.once.Do(func() {
		close(h.released)
		for _, ps := range h.set.proxies {
			// Not found is a link whose arming an earlier Heal took back.
			_ = ps[len(ps)-1].Toxics.RemoveToxic(context.Background(), holdToxic)
		}
		holds.Delete(h.id)
		h.set.mu.Lock()
		defer h.set.mu.Unlock()
		for i, o := range h.set.holds {
			if o == h {
				h.set.holds = append(h.set.holds[:i], h.set.holds[i+1:]...)
				break
			}
		}
	})
}

// claim makes w the hold's write if it caught none yet.
func (h *Hold) claim(w storage.Request) bool {
	if !h.claimed.CompareAndSwap(false, true) {
		return false
	}
	h.caught <- Held{Process: w.Client, Value: w.Value, At: history.Now()}
	return true
}

// holdType is the Toxiproxy toxic type a Hold arms a link with.
const holdType = "lockbreaker-hold-write"

func init() { toxics.Register(holdType, new(holdWrite)) }

// holdWrite is the toxic on one storage link. It keeps the chunk it holds in its link's
// state, so that another toxic added behind it (which restarts it) does not let it go;
// Cleanup, when it is removed, delivers it.
type holdWrite struct {
	Hold string `json:"hold"`
}

// holding is a link's state: the chunk held there, if any.
type holding struct{ chunk *stream.StreamChunk }

func (*holdWrite) NewState() any { return &holding{} }

// GetBufferSize lets what a client sends behind a held write queue up unblocked.
func (*holdWrite) GetBufferSize() int { return 1024 }

func (t *holdWrite) Pipe(stub *toxics.ToxicStub) {
	state := stub.State.(*holding)
	for {
		if state.chunk != nil {
			if !t.wait(stub) {
				return
			}
			stub.Output <- state.chunk
			state.chunk = nil
		}
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if h, ok := holds.Load(t.Hold); ok {
				if w, ok := firstWrite(c.Data); ok && h.(*Hold).claim(w) {
					state.chunk = c
					continue
				}
			}
			stub.Output <- c
		}
	}
}

// wait waits for the hold's release; false when the toxic was interrupted first.
func (t *holdWrite) wait(stub *toxics.ToxicStub) bool {
	h, ok := holds.Load(t.Hold)
	if !ok {
		return true
	}
	select {
	case <-h.(*Hold).released:
		return true
	case <-stub.Interrupt:
		return false
	}
}

// Cleanup delivers the held chunk when the toxic is removed.
func (*holdWrite) Cleanup(stub *toxics.ToxicStub) {
	if state := stub.State.(*holding); state.chunk != nil {
		stub.Output <- state.chunk
		state.chunk = nil
	}
}

// firstWrite is the first storage write request among the lines of a chunk. A line cut
// across two chunks is not recognised: the hold catches a later write instead.
func firstWrite(data []byte) (storage.Request, bool) {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var r storage.Request
		if json.Unmarshal(line, &r) == nil && r.Op == storage.OpWrite {
			return r, true
		}
	}
	return storage.Request{}, false
}
