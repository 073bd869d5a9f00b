package clientnet

import (
	"net/netip"
	"os"
	"strings"
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
