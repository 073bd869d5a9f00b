package workloads

import (
	"testing"

	"github.com/lockbreaker/lockbreaker/system"
)

// Every system's default client exists and runs on it; every client runs on a known system.
func TestClientsAndSystemsAgree(t *testing.T) {
	for _, s := range system.All() {
		c, err := LookupClient(s.DefaultClient)
		if err != nil || c.System != s.Name {
			t.Errorf("system %s: default client %q: %+v, %v", s.Name, s.DefaultClient, c, err)
		}
	}
	for _, name := range ClientNames() {
		c, _ := LookupClient(name)
		if _, err := system.Lookup(c.System); err != nil {
			t.Errorf("client %s: %v", name, err)
		}
		if !c.Tokens && c.NoTokens == "" {
			t.Errorf("client %s grants no token and does not say why", name)
		}
	}
}
