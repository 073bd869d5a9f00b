package nemesis

import (
	"reflect"
	"testing"
)

// Every field of Needs is one lever with its row in levers, so that or, available and
// OfCluster, which read the rows, cannot miss a field added to Needs.
func TestEveryNeedIsALever(t *testing.T) {
	fields := needsFields()
	rows := map[string]int{}
	for _, l := range levers {
		var n Needs
		*l.field(&n) = true
		v := reflect.ValueOf(n)
		for i, name := range fields {
			if v.Field(i).Bool() {
				rows[name]++
			}
		}
	}
	for _, name := range fields {
		if rows[name] != 1 {
			t.Errorf("Needs.%s has %d rows in levers, want 1", name, rows[name])
		}
	}
	if len(levers) != len(fields) {
		t.Errorf("%d levers for %d fields of Needs", len(levers), len(fields))
	}
}

// or keeps every lever either side asks for; OfCluster keeps only those a cluster is
// started with.
func TestNeedsCombine(t *testing.T) {
	all := Needs{}
	for _, l := range levers {
		var n Needs
		*l.field(&n) = true
		all = all.or(n)
		if got := n.OfCluster() == n; got != l.onCluster {
			t.Errorf("%+v: kept by OfCluster %v, want %v", n, got, l.onCluster)
		}
	}
	v := reflect.ValueOf(all)
	for i, name := range needsFields() {
		if !v.Field(i).Bool() {
			t.Errorf("or lost %s", name)
		}
	}
	want := Needs{Clocks: true, Network: true, Restarts: true, ClientAddrs: true, Links: true, Disks: true}
	if got := all.OfCluster(); got != want {
		t.Errorf("OfCluster of every lever = %+v, want %+v", got, want)
	}
}

// needsFields are the names of Needs's fields, in order.
func needsFields() []string {
	t := reflect.TypeFor[Needs]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Name
	}
	return names
}
