// Package clientnet puts each lock client on its own address on the cluster network, so
// that a partition can cut one client off some nodes while the others still reach them.
//
// A worker stays a process of the harness (so SIGSTOP, SIGKILL and CLOCK_MONOTONIC are
// those of the host) but starts in a network namespace of its own (CLONE_NEWNET). The
// harness then plugs that namespace into the cluster network's Linux bridge with a veth
// pair and gives it the address of its slot, counted down from the top of the subnet
// (Docker hands addresses out from the bottom), so a worker that replaces a dead one has
// the same address. The namespace, and the veth pair with it, dies with the process: a
// killed harness leaves nothing behind. Cuts are iptables rules inside a worker's
// namespace. Clients of nodes elsewhere (machines) join a bridge of lockbreaker's own
// instead, routed out through this host (Route, routed.go).
//
// It needs root and the host tools ip, nsenter and iptables (Supported says which are
// missing).
package clientnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/hostcmd"

	"github.com/lockbreaker/lockbreaker/internal/hosttools"
)

// callTimeout bounds one command run on the host: heals run on contexts that outlive
// the run's, and a stuck command must not hang them.
const callTimeout = 10 * time.Second

// tools are the host commands this package runs.
var tools = []string{"ip", "nsenter", "iptables"}

// Supported says why lock clients cannot have addresses of their own on this host; nil
// when they can.
var Supported = hosttools.Lack(func(root bool, missing []string) error {
	if !root {
		return errors.New("lock clients get addresses of their own only when lockbreaker runs as root (network namespaces, veth pairs)")
	}
	return fmt.Errorf("lock clients get addresses of their own only with %s on the host (missing: %s)",
		strings.Join(tools, ", "), strings.Join(missing, ", "))
}, tools...)

// Network is a cluster network lock clients join.
type Network struct {
	bridge  string
	subnet  netip.Prefix
	gateway netip.Addr
	// routed: the bridge is lockbreaker's own, its traffic masqueraded (Route).
	routed bool
}

// New describes the network behind a Linux bridge with an IPv4 subnet and gateway.
func New(bridge string, subnet netip.Prefix, gateway netip.Addr) (*Network, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if bridge == "" || !subnet.Addr().Is4() || !subnet.Contains(gateway) || subnet.Bits() > 24 {
		return nil, fmt.Errorf("client network: want a bridge and an IPv4 subnet of at least /24 holding its gateway, got %q %s %s",
			bridge, subnet, gateway)
	}
	return &Network{bridge: bridge, subnet: subnet.Masked(), gateway: gateway}, nil
}

// Gateway is the host's address on the network: services the harness serves to the
// clients (the storage) listen there.
func (n *Network) Gateway() netip.Addr { return n.gateway }

// Isolate makes a command start in a network namespace of its own.
func (n *Network) Isolate(attr *syscall.SysProcAttr) { attr.Cloneflags |= syscall.CLONE_NEWNET }

// Addr is the address of slot (0, 1, ...): the broadcast address less 1+slot.
func (n *Network) Addr(slot int) netip.Addr {
	b := n.subnet.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= 1<<(32-n.subnet.Bits()) - 1 // broadcast
	v -= uint32(1 + slot)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Attach plugs the namespace of process pid (started with Isolate) into the bridge as the
// address of slot, with the gateway as its route out. The slot's hardware address is
// fixed too, so the nodes' ARP caches stay right when a new process takes the slot.
func (n *Network) Attach(ctx context.Context, pid, slot int) error {
	host := "lbc" + strconv.Itoa(pid) // at most 10 characters: interface names take 15
	addr := n.Addr(slot)
	cidr := fmt.Sprintf("%s/%d", addr, n.subnet.Bits())
	ip := addr.As4()
	// Locally administered, unicast, and the address's own bytes.
	mac := fmt.Sprintf("0a:6c:%02x:%02x:%02x:%02x", ip[0], ip[1], ip[2], ip[3])
	steps := [][]string{
		{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "address", mac, "netns", strconv.Itoa(pid)},
		{"ip", "link", "set", host, "master", n.bridge, "up"},
		// Connections the process leaves open to a peer that is cut off or dead keep its
		// namespace alive while the kernel retries them: one retry, not eight.
		{"nsenter", "-t", strconv.Itoa(pid), "-n", "sh", "-c",
			`ip link set lo up && ip addr add "$1" dev eth0 && ip link set eth0 up && ip route add default via "$2" && ` +
				`echo 1 > /proc/sys/net/ipv4/tcp_orphan_retries`,
			"sh", cidr, n.gateway.String()},
	}
	for _, step := range steps {
		if _, err := run(ctx, step[0], step[1:]...); err != nil {
			return fmt.Errorf("put client %d on %s as %s: %w", pid, n.bridge, cidr, err)
		}
	}
	return nil
}

// Detach takes the namespace of process pid, which has exited, off the bridge. The
// namespace may outlive the process while the kernel gives up the connections it left;
// it must not hold the slot's address on the bridge meanwhile, where the process that
// takes the slot next needs it.
func (n *Network) Detach(ctx context.Context, pid int) error {
	host := "lbc" + strconv.Itoa(pid)
	out, err := run(ctx, "ip", "link", "del", host)
	if err != nil && !strings.Contains(out, "Cannot find device") {
		return fmt.Errorf("take client %d off %s: %w", pid, n.bridge, err)
	}
	return nil
}

// DropFrom cuts process pid off the sources (IPv4 addresses) both ways: it drops every
// packet from them and every packet to them, so that a cut holds where the other end cannot
// tell this client from the others (a routed network's nodes see one address).
func (n *Network) DropFrom(ctx context.Context, pid int, sources ...string) error {
	script := `for ip; do iptables -w -I INPUT -s "$ip" -j DROP && iptables -w -I OUTPUT -d "$ip" -j DROP || exit 1; done`
	return n.inNamespace(ctx, pid, "cut client off "+strings.Join(sources, ","), "sh", append([]string{"-c", script, "sh"}, sources...)...)
}

// DropTo makes process pid drop every TCP packet it sends to service.
func (n *Network) DropTo(ctx context.Context, pid int, service netip.AddrPort) error {
	return n.inNamespace(ctx, pid, "cut client off "+service.String(), "iptables", "-w", "-I", "OUTPUT", "-p", "tcp",
		"-d", service.Addr().String(), "--dport", strconv.Itoa(int(service.Port())), "-j", "DROP")
}

// Heal removes every cut from process pid's namespace.
func (n *Network) Heal(ctx context.Context, pid int) error {
	// Every step runs even when one before it failed: a cut left is a fault outliving its run.
	script := `iptables -w -F INPUT; a=$?; iptables -w -F OUTPUT; b=$?; exit $((a|b))`
	return n.inNamespace(ctx, pid, "heal client network", "sh", "-c", script)
}

func (n *Network) inNamespace(ctx context.Context, pid int, what, name string, args ...string) error {
	// A worker that has exited leaves its pid free: a process reusing it may live in the
	// host's own namespace, whose rules no heal here would touch.
	if own, err := sameNamespace(pid); err != nil || own {
		return fmt.Errorf("%s (process %d): not a client namespace (%v)", what, pid, err)
	}
	if _, err := run(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", name}, args...)...); err != nil {
		return fmt.Errorf("%s (process %d): %w", what, pid, err)
	}
	return nil
}

// sameNamespace reports whether process pid shares this process's network namespace.
func sameNamespace(pid int) (bool, error) {
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return false, err
	}
	ours, err := os.Readlink("/proc/self/ns/net")
	return theirs == ours, err
}

// run runs a host command, bounded by callTimeout, and returns its output; a failure
// carries the output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return hostcmd.Output(ctx, name, args...)
}
