package workloads

import (
	"testing"

	"github.com/lockbreaker/lockbreaker/system"
)

// Every system's default client exists and runs on it; every client runs on a known system.
func TestClientsAndSystemsAgree(t *testing.T) {
	for _, s := range system.All() {
		c, err := LookupClient(s.DefaultClient)
		if err != nil || !c.RunsOn(s.Name) {
			t.Errorf("system %s: default client %q: %+v, %v", s.Name, s.DefaultClient, c, err)
		}
	}
	for _, name := range ClientNames() {
		c, _ := LookupClient(name)
		if len(c.Systems) == 0 {
			t.Errorf("client %s runs on no system", name)
		}
		for _, s := range c.Systems {
			if _, err := system.Lookup(s); err != nil {
				t.Errorf("client %s: %v", name, err)
			}
		}
		if !c.Tokens && c.NoTokens == "" {
			t.Errorf("client %s grants no token and does not say why", name)
		}
	}
}
