package links

import (
	"context"
	"io"
	"net/netip"
	"testing"

	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// What a proxy on a client's link costs a storage request, beside the same request sent
// directly (make bench): the proxies are in a run's path only when one of its faults asks
// for them, and then for every request of every client.
func BenchmarkStorageRoundTrip(b *testing.B) {
	store, err := storage.Listen("127.0.0.1:0", true, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	set, err := Open(netip.MustParseAddr("127.0.0.1"), 1, nil, store.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	for _, route := range []struct{ name, addr string }{{"direct", store.Addr()}, {"proxied", set.Storage(0)}} {
		b.Run(route.name, func(b *testing.B) {
			c, err := storage.Dial(context.Background(), route.addr, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			token := int64(1)
			req := storage.Request{Op: storage.OpRead, Key: "k", Token: &token}
			for b.Loop() {
				if _, err := c.Do(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
