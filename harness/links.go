package harness

import (
	"net/netip"
	"time"

	"github.com/lockbreaker/lockbreaker/links"
	"github.com/lockbreaker/lockbreaker/nemesis"
)

// openLinks puts the proxies of package links on every client's links when the nemesis
// asks for them (nemesis.Needs.Links), listening where the clients reach the storage
// (listen), and routes each slot's configuration through its own. A client waits for the
// storage as long as a fault may hold its write there (nemesis.HoldBound), so the write is
// delivered, not given up. nil, and the configurations as they were, when no fault asks.
func openLinks(needs nemesis.Needs, listen netip.Addr, nodes []string, storage string, configs []WorkerConfig) (*links.Set, error) {
	if !needs.Links {
		return nil, nil
	}
	set, err := links.Open(listen, len(configs), nodes, storage)
	if err != nil {
		return nil, err
	}
	for slot := range configs {
		c := &configs[slot]
		c.Lock.Nodes, c.Storage = set.Nodes(slot), set.Storage(slot)
		c.OpTimeout += nemesis.HoldBound(c.Lock.TTL)
	}
	return set, nil
}

// linksLever is a run's proxies as the nemesis's lever (nemesis.Links): by process
// number, each found in its slot.
type linksLever struct {
	set     *links.Set
	workers *pool
}

func (l linksLever) SlowClient(p int, latency, jitter time.Duration) error {
	return l.onSlot(p, func(slot int) error { return l.set.Slow(slot, latency, jitter) })
}

func (l linksLever) BreakClient(p int, b links.Break) error {
	return l.onSlot(p, func(slot int) error { return l.set.Break(slot, b) })
}

// onSlot does f to the links of process p's slot.
func (l linksLever) onSlot(p int, f func(slot int) error) error {
	w, err := l.workers.find(p)
	if w == nil {
		return err // one that has exited sends nothing more
	}
	return f(w.slot)
}

func (l linksLever) HoldNextWrite() (nemesis.WriteHold, error) { return l.set.HoldNextWrite() }

func (l linksLever) HealLinks() { l.set.Heal() }
