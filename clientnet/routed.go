package clientnet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/lockbreaker/lockbreaker/internal/owner"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
)

// Routed networks: lock clients whose nodes are on no bridge of this host (machines reached
// over SSH) join a bridge of lockbreaker's own, whose traffic leaves through this host's
// routes masqueraded as this host's own address. The nodes then see every client at this
// host's address, so a cut of one client is made in the client's namespace alone, both
// ways (DropFrom). The bridge carries its owner in its alias, so that Sweep removes a
// killed run's bridge, and its iptables rules carry the bridge's name in their comment.

// routedPrefix begins the name of every routed bridge ("lbr-<pid>-<n>", 15 characters at
// most), and routedSpace holds their subnets, a /24 each.
const routedPrefix = "lbr-"

var routedSpace = netip.MustParsePrefix("10.219.0.0/16")

// routedSeq numbers this process's routed bridges.
var routedSeq atomic.Int64

// routedLockFile is the file whose lock is held while a subnet is chosen and taken, or a
// routed network removed, so that two runs at once (two test packages, two suites, even two
// goroutines: each lock is on a file of its own opening) never take the same subnet.
var routedLockFile = filepath.Join(os.TempDir(), "lockbreaker-routed.lock")

// lockRouted takes the lock of routedLockFile, and returns its release.
func lockRouted() (func(), error) {
	f, err := os.OpenFile(routedLockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("routed client network: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("routed client network: lock %s: %w", routedLockFile, err)
	}
	return func() { f.Close() }, nil // closing the file releases its lock
}

// Route makes a routed network: a bridge of its own, on the first subnet of routedSpace
// that no address or route of this host overlaps, whose clients reach every address this
// host reaches. Close removes it.
func Route(ctx context.Context) (*Network, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	unlock, err := lockRouted()
	if err != nil {
		return nil, err
	}
	defer unlock()
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	pid := os.Getpid()
	name := fmt.Sprintf("%s%d-%d", routedPrefix, pid, routedSeq.Add(1))
	gateway := subnet.Addr().Next()
	n := &Network{bridge: name, subnet: subnet, gateway: gateway, routed: true}
	alias := fmt.Sprintf("lockbreaker %d %s", pid, owner.Start(pid))
	steps := [][]string{
		{"ip", "link", "add", name, "type", "bridge"},
		{"ip", "link", "set", name, "alias", alias},
		{"ip", "addr", "add", fmt.Sprintf("%s/%d", gateway, subnet.Bits()), "dev", name},
		{"ip", "link", "set", name, "up"},
	}
	for _, rule := range routedRules(name, subnet) {
		steps = append(steps, append([]string{"iptables", "-w", "-t", rule.table, "-I", rule.chain, "1"}, rule.spec...))
	}
	for _, step := range steps {
		if _, err := run(ctx, step[0], step[1:]...); err != nil {
			return nil, errors.Join(fmt.Errorf("routed client network %s: %w", name, err), removeRouted(context.WithoutCancel(ctx), name))
		}
	}
	if err := turnForwardingOn(); err != nil {
		return nil, errors.Join(err, removeRouted(context.WithoutCancel(ctx), name))
	}
	return n, nil
}

// turnForwardingOn turns the host's forwarding of IPv4 packets on where it is off, and
// leaves forwardMarker behind to say so: the last routed network removed, by whichever
// process, turns it off again.
func turnForwardingOn() error {
	forward, err := os.ReadFile(ipForward)
	if err != nil || strings.TrimSpace(string(forward)) != "0" {
		return err
	}
	if err := os.WriteFile(forwardMarker, nil, 0o600); err != nil {
		return fmt.Errorf("routed client network: %w", err)
	}
	return os.WriteFile(ipForward, []byte("1\n"), 0o644)
}

// turnForwardingBack turns the host's forwarding off again once no routed network is left,
// when a routed network turned it on (forwardMarker).
func turnForwardingBack() error {
	if _, err := os.Stat(forwardMarker); err != nil {
		return nil
	}
	if left, err := routedBridges(); err != nil || len(left) > 0 {
		return err
	}
	return errors.Join(os.WriteFile(ipForward, []byte("0\n"), 0o644), os.Remove(forwardMarker))
}

// Routed says the network is a routed one (Route): the nodes see every client at this
// host's address.
func (n *Network) Routed() bool { return n.routed }

// ipForward is the host's switch for forwarding IPv4 packets between interfaces, which a
// routed network needs on; forwardMarker says a routed network turned it on. Variables, so
// that a test can play them with files of its own.
var (
	ipForward     = "/proc/sys/net/ipv4/ip_forward"
	forwardMarker = filepath.Join(os.TempDir(), "lockbreaker-routed.forward")
)

// iptablesRule is one rule a routed network puts in the host's tables.
type iptablesRule struct {
	table, chain string
	spec         []string
}

// routedRules are a routed bridge's rules: its traffic forwarded both ways before any
// rule of the host's own (Docker's FORWARD drops what it does not know), and masqueraded
// where it leaves.
func routedRules(bridge string, subnet netip.Prefix) []iptablesRule {
	tag := []string{"-m", "comment", "--comment", "lockbreaker:" + bridge}
	return []iptablesRule{
		{"filter", "FORWARD", append([]string{"-i", bridge}, append(tag, "-j", "ACCEPT")...)},
		{"filter", "FORWARD", append([]string{"-o", bridge}, append(tag, "-j", "ACCEPT")...)},
		{"nat", "POSTROUTING", append([]string{"-s", subnet.String(), "!", "-o", bridge}, append(tag, "-j", "MASQUERADE")...)},
	}
}

// Close removes a routed network: its bridge, its rules, and the host's forwarding when a
// routed network turned it on and none is left. A network on a bridge of Docker's has
// nothing to remove.
func (n *Network) Close(ctx context.Context) error {
	if !n.routed {
		return nil
	}
	unlock, err := lockRouted()
	if err != nil {
		return err
	}
	defer unlock()
	return removeRouted(ctx, n.bridge)
}

// removeRouted removes routed bridge name with its rules, and the forwarding its Route
// turned on when it is the last; every step runs even when one before it failed. The
// caller holds the locks of lockRouted.
func removeRouted(ctx context.Context, name string) error {
	var errs []error
	for _, chain := range []struct{ table, chain string }{{"filter", "FORWARD"}, {"nat", "POSTROUTING"}} {
		errs = append(errs, deleteTagged(ctx, chain.table, chain.chain, "lockbreaker:"+name))
	}
	if out, err := run(ctx, "ip", "link", "del", name); err != nil && !strings.Contains(out, "Cannot find device") {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, turnForwardingBack())...)
}

// deleteTagged deletes every rule of table's chain whose comment is tag: iptables -S lists
// each rule as the words that add it (the comment quoted), which begun with -D delete it.
func deleteTagged(ctx context.Context, table, chain, tag string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", table, "-S", chain).Output() // stdout alone: warnings go to stderr
	if err != nil {
		return fmt.Errorf("iptables -t %s -S %s: %w", table, chain, err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		words, err := shellwords.Split(line)
		if err != nil || len(words) < 2 || words[0] != "-A" || !slices.Contains(words, tag) {
			continue
		}
		_, err = run(ctx, "iptables", append([]string{"-w", "-t", table, "-D"}, words[1:]...)...)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// routedBridge is a routed bridge found on this host.
type routedBridge struct {
	name string
	gone bool // its owner has exited
}

// routedBridges are the routed bridges on this host now.
func routedBridges() ([]routedBridge, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var found []routedBridge
	for _, iface := range ifaces {
		if !strings.HasPrefix(iface.Name, routedPrefix) {
			continue
		}
		b := routedBridge{name: iface.Name, gone: true}
		alias, _ := os.ReadFile(filepath.Join("/sys/class/net", iface.Name, "ifalias"))
		if f := strings.Fields(string(alias)); len(f) >= 3 && f[0] == "lockbreaker" {
			pid, _ := strconv.Atoi(f[1])
			b.gone = pid <= 0 || owner.Gone(pid, f[2])
		}
		found = append(found, b)
	}
	return found, nil
}

// Sweep removes the routed bridges, and their rules, whose run has exited (killed with
// SIGKILL): how many it removed.
func Sweep(ctx context.Context) (int, error) {
	bridges, err := routedBridges()
	if err != nil || !slices.ContainsFunc(bridges, func(b routedBridge) bool { return b.gone }) {
		return 0, err
	}
	unlock, err := lockRouted()
	if err != nil {
		return 0, err
	}
	defer unlock()
	removed := 0
	var errs []error
	for _, b := range bridges {
		if !b.gone {
			continue
		}
		if err := removeRouted(ctx, b.name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// freeSubnet is the first /24 of routedSpace that overlaps no address of this host's and no
// route of its main table but the default.
func freeSubnet() (netip.Prefix, error) {
	taken, err := hostPrefixes()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("routed client network: %w", err)
	}
	base := routedSpace.Addr().As4()
	for i := range 256 {
		candidate := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(i), 0}), 24)
		if !overlapsAny(candidate, taken) {
			return candidate, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("routed client network: every /24 of %s is taken on this host", routedSpace)
}

func overlapsAny(p netip.Prefix, taken []netip.Prefix) bool {
	for _, t := range taken {
		if t.Overlaps(p) {
			return true
		}
	}
	return false
}

// hostPrefixes are this host's addresses' subnets and its main table's routes, but the
// default route.
func hostPrefixes() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var taken []netip.Prefix
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			taken = append(taken, p.Masked())
		}
	}
	routes, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, err
	}
	return append(taken, parseRoutes(string(routes))...), nil
}

// parseRoutes reads /proc/net/route's destinations (little-endian hex, with their masks),
// leaving the default route out.
func parseRoutes(table string) []netip.Prefix {
	var routes []netip.Prefix
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || mask == 0 {
			continue
		}
		var d, m [4]byte
		binary.LittleEndian.PutUint32(d[:], uint32(dst))
		binary.LittleEndian.PutUint32(m[:], uint32(mask))
		bits := 0
		for _, b := range m {
			for ; b&0x80 != 0; b <<= 1 {
				bits++
			}
		}
		routes = append(routes, netip.PrefixFrom(netip.AddrFrom4(d), bits).Masked())
	}
	return routes
}
