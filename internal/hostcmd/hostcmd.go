// Package hostcmd runs a command on this host for a fault or its heal (nsenter, ip,
// iptables), within the context its caller bounds, so that a failure says what the command
// printed.
package hostcmd

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Output runs name with args and returns what it printed, stdout and stderr together; a
// failure carries that output.
func Output(ctx context.Context, name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}
