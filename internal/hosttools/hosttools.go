// Package hosttools says whether this process can run the host commands a fault makes from
// this host (nsenter, iptables, ip): it needs root and each tool on PATH. It runs nothing.
package hosttools

import (
	"os"
	"os/exec"
)

// Check says what this process lacks to run tools: root (false when it is not root, and
// then nothing more is looked at), or the tools that are not on PATH.
func Check(tools ...string) (root bool, missing []string) {
	if os.Geteuid() != 0 {
		return false, nil
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	return true, missing
}
