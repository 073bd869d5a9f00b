// Package links puts each lock client's connections, to every node and to the storage,
// through Toxiproxy proxies of its own (github.com/Shopify/toxiproxy/v2, used as a library
// inside the harness), so that a fault on the network reaches one client's traffic, or
// every client's, on any machine and with no kernel module: latency with jitter on
// everything a client sends, one storage write held in the network until it is let go
// (Kleppmann's delayed packet, a holder's write that arrives after its lease), and a
// client's connections broken (a Break: reset, or gone silent and then closed).
//
// This package is the only one that speaks Toxiproxy: its toxics' names and attributes
// stay here, behind Set's methods and Break's values.
//
// A run has proxies only when one of its faults asks for them (nemesis.Needs.Links); every
// other run dials the servers directly, as it always has. The links are per slot, not per
// process: a worker that replaces a dead one dials through its slot's proxies.
package links

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Set is the proxies of one run: for each slot, one per node and one to the storage.
type Set struct {
	api *toxiproxy.ApiServer
	// proxies[slot] are the slot's proxies, the nodes' in their order, the storage's last.
	proxies [][]*toxiproxy.Proxy

	mu    sync.Mutex
	holds []*Hold // armed and not yet released
}

// Open starts the proxies of slots clients on listen (any free port each): one to each
// node address and one to the storage's. Close stops them.
func Open(listen netip.Addr, slots int, nodes []string, storage string) (*Set, error) {
	s := &Set{api: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), proxies: make([][]*toxiproxy.Proxy, slots)}
	upstreams := append(append([]string{}, nodes...), storage)
	for slot := range slots {
		for i, up := range upstreams {
			p := toxiproxy.NewProxy(s.api, fmt.Sprintf("c%d-%d", slot, i), netip.AddrPortFrom(listen, 0).String(), up)
			if err := p.Start(); err != nil {
				s.Close()
				return nil, fmt.Errorf("proxy to %s: %w", up, err)
			}
			s.proxies[slot] = append(s.proxies[slot], p)
		}
	}
	return s, nil
}

// Nodes are the addresses slot's client dials for the nodes, in their order.
func (s *Set) Nodes(slot int) []string {
	ps := s.proxies[slot]
	addrs := make([]string, len(ps)-1)
	for i, p := range ps[:len(ps)-1] {
		addrs[i] = p.Listen
	}
	return addrs
}

// Storage is the address slot's client dials for the storage.
func (s *Set) Storage(slot int) string {
	ps := s.proxies[slot]
	return ps[len(ps)-1].Listen
}

// Reach is which of a client's links a fault strikes, and which way: the zero Reach is
// what the client sends, on every link.
type Reach struct {
	// Node is the node whose link is struck, 1 for the first; 0 strikes every link, the
	// storage's too unless LockOnly.
	Node int
	// Answers strikes what comes back to the client (Toxiproxy's downstream) instead of
	// what it sends (upstream).
	Answers bool
	// LockOnly spares the storage's link when Node is 0: the fault is on the lock service.
	LockOnly bool
}

// Slow adds latency, give or take jitter, to what r reaches of slot's client's links,
// until Heal.
func (s *Set) Slow(slot int, r Reach, latency, jitter time.Duration) error {
	return s.addToSlot(slot, r, slowToxic, "latency", fmt.Sprintf(`{"latency":%d,"jitter":%d}`, latency.Milliseconds(), jitter.Milliseconds()))
}

// addToSlot adds a toxic (see addToxic) on the links of slot that r reaches.
func (s *Set) addToSlot(slot int, r Reach, name, typ, attrs string) error {
	ps := s.proxies[slot]
	if r.Node < 0 || r.Node >= len(ps) { // the storage's proxy is last
		return fmt.Errorf("links: no node %d (the client has links to %d nodes)", r.Node, len(ps)-1)
	}
	switch {
	case r.Node > 0:
		ps = ps[r.Node-1 : r.Node]
	case r.LockOnly:
		ps = ps[:len(ps)-1]
	}
	stream := "upstream"
	if r.Answers {
		stream, name = "downstream", name+"-answers"
	}
	var errs []error
	for _, p := range ps {
		errs = append(errs, addToxic(p, name, typ, stream, attrs))
	}
	return errors.Join(errs...)
}

// The names of the toxics a Set adds: one of each kind per proxy at most.
const (
	slowToxic    = "slow"
	holdToxic    = "hold"
	resetToxic   = "reset"
	silenceToxic = "silence"
)

// A Break is how a client's links fail what it sends, until Heal: Reset or Silence. The
// zero Break breaks nothing; Set.Break refuses it.
type Break struct {
	name, typ  string
	closeAfter time.Duration // Silence's
}

// Reset answers what a client sends with the connection's end, at once: the request is
// dropped unanswered and the client reads a reset (Toxiproxy's reset_peer with no delay). A
// connection the client makes while the reset is on ends with a TCP RST; one it made
// before ends with a plain close (FIN), since Toxiproxy sets a connection up for resets only
// when it starts: either way the client's read fails at once.
func Reset() Break { return Break{name: resetToxic, typ: "reset_peer"} }

// Silence lets nothing a client sends through (Toxiproxy's timeout): each connection stays
// open and unanswered until closeAfter has passed since the silence began or since the
// client last sent on it, whichever is later, and the proxy then closes it; a closeAfter
// under a millisecond keeps it silent until Heal. Heal closes every connection that was
// silenced, as the toxic's own clean-up does.
func Silence(closeAfter time.Duration) Break {
	return Break{name: silenceToxic, typ: "timeout", closeAfter: closeAfter}
}

// String says what b does, for a nemesis's tests and logs.
func (b Break) String() string {
	switch b.name {
	case resetToxic:
		return "reset"
	case silenceToxic:
		return fmt.Sprintf("silent, closed after %s", b.closeAfter)
	}
	return "no break"
}

// Break makes what r reaches of slot's client's links fail as b says, until Heal.
func (s *Set) Break(slot int, r Reach, b Break) error {
	if b.name == "" {
		return errors.New("links: no break given")
	}
	return s.addToSlot(slot, r, b.name, b.typ, fmt.Sprintf(`{"timeout":%d}`, b.closeAfter.Milliseconds()))
}

// addToxic adds a toxic of type typ named name on p's stream (upstream: what the client
// sends; downstream: what comes back), with attrs (a JSON object). A proxy holds one toxic
// of a name: one already there is left as it is.
func addToxic(p *toxiproxy.Proxy, name, typ, stream, attrs string) error {
	_, err := p.Toxics.AddToxicJson(strings.NewReader(
		fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)))
	if errors.Is(err, toxiproxy.ErrToxicAlreadyExists) {
		return nil
	}
	return err
}

// Heal removes every toxic from every link, delivering what any held.
func (s *Set) Heal() {
	s.mu.Lock()
	holds := s.holds
	s.holds = nil
	s.mu.Unlock()
	for _, h := range holds {
		h.Release()
	}
	for _, ps := range s.proxies {
		for _, p := range ps {
			p.Toxics.ResetToxics(context.Background())
		}
	}
}

// Close heals and stops every proxy, closing the connections through them.
func (s *Set) Close() {
	s.Heal()
	for _, ps := range s.proxies {
		for _, p := range ps {
			p.Stop()
		}
	}
}
