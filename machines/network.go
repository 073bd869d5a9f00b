package machines

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
)

// Partitions on machines: rules in an iptables chain of lockbreaker's own on each machine,
// jumped to first from INPUT. Its first rule lets the machine's SSH port through, so no cut
// ever cuts the harness off a machine; the heal flushes the chain alone, and Stop and Clean
// remove it: the machine's own rules are never touched.

// chain is lockbreaker's iptables chain on a machine.
const chain = "lockbreaker"

// IP is the address of node or monitor name as the other machines and this host reach it;
// "" for a name the cluster lacks.
func (c *Cluster) IP(name string) string {
	for _, n := range c.servers() {
		if n.name == name {
			return n.ip
		}
	}
	return ""
}

// Gateway is the address the lock clients' traffic comes from: this host's, as the first
// machine sees it (each machine's own view of it is what its rules drop).
func (c *Cluster) Gateway() string { return c.nodes[0].control }

// DropFrom makes node name drop every packet from the sources (the nodes' IPs, or Gateway:
// the lock clients and this host), but its SSH port's.
func (c *Cluster) DropFrom(ctx context.Context, name string, sources ...string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	script := []string{
		fmt.Sprintf("iptables -w -N %s 2>/dev/null || true", chain),
		fmt.Sprintf("iptables -w -C INPUT -j %[1]s 2>/dev/null || iptables -w -I INPUT 1 -j %[1]s", chain),
		fmt.Sprintf("iptables -w -C %[1]s -p tcp --dport %[2]d -j RETURN 2>/dev/null || iptables -w -I %[1]s 1 -p tcp --dport %[2]d -j RETURN",
			chain, n.m.addr.port()),
	}
	for _, src := range sources {
		if src == c.Gateway() {
			src = n.control
		}
		script = append(script, fmt.Sprintf("iptables -w -A %s -s %s -j DROP", chain, shellwords.Quote(src)))
	}
	if _, err := n.m.Sudo(ctx, "set -e\n"+strings.Join(script, "\n")); err != nil {
		return fmt.Errorf("cut node %s off %s: %w", name, strings.Join(sources, ", "), err)
	}
	return nil
}

// HealNetwork removes every cut: it flushes lockbreaker's chain on every machine.
func (c *Cluster) HealNetwork(ctx context.Context) error {
	return c.each(func(_ int, n node) error {
		if _, err := n.m.Sudo(ctx, fmt.Sprintf("iptables -w -F %s 2>/dev/null || true", chain)); err != nil {
			return fmt.Errorf("heal node %s's network: %w", n.name, err)
		}
		return nil
	})
}

// removeChain is a shell script that removes lockbreaker's chain and its jump, where the
// machine has iptables and the chain.
var removeChain = fmt.Sprintf(`if command -v iptables >/dev/null; then
	while iptables -w -D INPUT -j %[1]s 2>/dev/null; do :; done
	iptables -w -F %[1]s 2>/dev/null; iptables -w -X %[1]s 2>/dev/null
fi`, chain)

// addresses are the two ends of the machine's connection: the machine's IP as this host
// reached it, and this host's as the machine sees it.
func (m *Machine) addresses(ctx context.Context) (machine, control string, err error) {
	c, err := m.connect(ctx)
	if err != nil {
		return "", "", err
	}
	machine, _, err = net.SplitHostPort(c.RemoteAddr().String())
	if err == nil {
		control, _, err = net.SplitHostPort(c.LocalAddr().String())
	}
	return machine, control, err
}
