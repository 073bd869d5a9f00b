// Package hosttools says whether this process can run the host commands a fault makes from
// this host (nsenter, iptables, ip): it needs root and each tool on PATH. It runs nothing.
package hosttools

import (
	"os"
	"os/exec"
	"sync"
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

// Lack returns a check, made once and then answered from memory, of what this process lacks
// to run tools: nil when nothing, else say's words for it (root false when it is not root).
func Lack(say func(root bool, missing []string) error, tools ...string) func() error {
	return sync.OnceValue(func() error {
		root, missing := Check(tools...)
		if root && len(missing) == 0 {
			return nil
		}
		return say(root, missing)
	})
}
