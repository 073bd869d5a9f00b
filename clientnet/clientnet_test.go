package clientnet

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestSlotsCountDownFromTheTopOfTheSubnet(t *testing.T) {
	n := &Network{bridge: "br-x", subnet: netip.MustParsePrefix("172.18.0.0/16"), gateway: netip.MustParseAddr("172.18.0.1")}
	for slot, want := range []string{"172.18.255.254", "172.18.255.253", "172.18.255.252"} {
		if got := n.Addr(slot).String(); got != want {
			t.Errorf("slot %d: got %s, want %s", slot, got, want)
		}
	}
	n.subnet = netip.MustParsePrefix("10.9.3.0/24")
	if got := n.Addr(4).String(); got != "10.9.3.250" {
		t.Errorf("slot 4 of a /24: got %s", got)
	}
}

func TestNewRefusesWhatItCannotJoin(t *testing.T) {
	if Supported() != nil {
		t.Skip(Supported())
	}
	for _, c := range []struct {
		bridge, subnet, gateway string
	}{
		{"", "172.18.0.0/16", "172.18.0.1"},
		{"br-x", "172.18.0.0/16", "10.0.0.1"},
		{"br-x", "172.18.0.0/28", "172.18.0.1"},
	} {
		if _, err := New(c.bridge, netip.MustParsePrefix(c.subnet), netip.MustParseAddr(c.gateway)); err == nil {
			t.Errorf("New(%q, %s, %s) accepted", c.bridge, c.subnet, c.gateway)
		}
	}
}

// A pid that lives in the host's own namespace (a worker's pid, reused after it exited)
// gets no rule and no heal: nothing here may touch the host's tables.
func TestHostNamespaceIsNeverTouched(t *testing.T) {
	n := &Network{}
	for _, err := range []error{
		n.Heal(t.Context(), os.Getpid()),
		n.DropFrom(t.Context(), os.Getpid(), "10.0.0.1"),
	} {
		if err == nil || !strings.Contains(err.Error(), "not a client namespace") {
			t.Errorf("got %v, want a refusal: not a client namespace", err)
		}
	}
}

// The routes of /proc/net/route are read as prefixes, the default route left out, and a
// routed network's subnet is the first /24 of its space that none of them overlaps.
func TestRoutedSubnetAvoidsTheHostsRoutes(t *testing.T) {
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" +
		"br1\t0000DB0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	routes := parseRoutes(table)
	want := []netip.Prefix{netip.MustParsePrefix("172.17.0.0/16"), netip.MustParsePrefix("10.219.0.0/24")}
	if len(routes) != len(want) || routes[0] != want[0] || routes[1] != want[1] {
		t.Fatalf("routes %v, want %v", routes, want)
	}
	if overlapsAny(netip.MustParsePrefix("10.219.1.0/24"), routes) || !overlapsAny(netip.MustParsePrefix("10.219.0.0/24"), routes) {
		t.Error("10.219.0.0/24 is taken and 10.219.1.0/24 is free")
	}
}

// A routed network is a bridge of its own with its rules on this host, and Close takes
// them all away again; its owner is seen alive, so Sweep would leave it alone.
func TestRoutedNetworkLeavesNothing(t *testing.T) {
	if Supported() != nil {
		t.Skip(Supported())
	}
	n, err := Route(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rules := func() string {
		out, _ := run(t.Context(), "sh", "-c", "iptables -w -S; iptables -w -t nat -S")
		return out
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge); err != nil || strings.Count(rules(), "lockbreaker:"+n.bridge) != 3 {
		t.Errorf("bridge %s: %v, rules:\n%s", n.bridge, err, rules())
	}
	bridges, err := routedBridges()
	if i := slices.IndexFunc(bridges, func(b routedBridge) bool { return b.name == n.bridge }); err != nil || i < 0 || bridges[i].gone {
		t.Errorf("routed bridges %+v (%v): want %s, its owner alive", bridges, err, n.bridge)
	}
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/class/net/" + n.bridge); err == nil || strings.Contains(rules(), "lockbreaker:"+n.bridge) {
		t.Errorf("bridge %s or its rules left:\n%s", n.bridge, rules())
	}
}

// Two routed networks at once (two runs) take subnets of their own.
func TestRoutedNetworksTakeSubnetsOfTheirOwn(t *testing.T) {
	if Supported() != nil {
		t.Skip(Supported())
	}
	nets := make([]*Network, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range nets {
		wg.Go(func() { nets[i], errs[i] = Route(t.Context()) })
	}
	wg.Wait()
	for i, n := range nets {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() {
			if err := n.Close(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	if nets[0].subnet.Overlaps(nets[1].subnet) {
		t.Errorf("both took %s", nets[0].subnet)
	}
}

// Forwarding a routed network turned on is turned off again once no routed network is
// left, by whichever process removes the last; forwarding the host had on is left on.
func TestRoutedForwardingIsGivenBack(t *testing.T) {
	dir := t.TempDir()
	ipForward, forwardMarker = filepath.Join(dir, "ip_forward"), filepath.Join(dir, "forward")
	t.Cleanup(func() {
		ipForward, forwardMarker = "/proc/sys/net/ipv4/ip_forward", filepath.Join(os.TempDir(), "lockbreaker-routed.forward")
	})
	if left, err := routedBridges(); err != nil || len(left) > 0 {
		t.Skipf("routed networks of other runs are up here: %v %v", left, err)
	}
	read := func() string { b, _ := os.ReadFile(ipForward); return strings.TrimSpace(string(b)) }
	for _, was := range []string{"0", "1"} {
		if err := os.WriteFile(ipForward, []byte(was+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := turnForwardingOn(); err != nil || read() != "1" {
			t.Fatalf("forwarding was %s: turned on %q (%v)", was, read(), err)
		}
		if err := turnForwardingBack(); err != nil || read() != was {
			t.Errorf("forwarding was %s: given back as %q (%v)", was, read(), err)
		}
		if _, err := os.Stat(forwardMarker); err == nil {
			t.Errorf("forwarding was %s: the marker stays", was)
		}
	}
}
