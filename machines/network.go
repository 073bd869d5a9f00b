package machines

import (
	"context"
	"net"
)

// Partitions on machines are nodes.Cluster's, in its chain (nodes.Chain) on each machine;
// the machine's SSH port is the node's KeepPort, so no cut ever cuts the harness off a
// machine, and Stop and Clean remove the chain: the machine's own rules are never touched.

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
