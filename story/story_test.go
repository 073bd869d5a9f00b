package story

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// Each history is the classic way its fault breaks a lock, written by hand; its story is
// told from mutual exclusion's first overlap, as analysis tells it.
func TestTellsWhoWhichTokenAndWhichFault(t *testing.T) {
	for _, tt := range []struct {
		name, history string
		ttl           time.Duration
		want          []string
	}{
		{"a paused holder's lost update", `
{"index":0,"type":"invoke","process":1,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":1,"f":"acquire","key":"k","time":1410000000}
{"index":2,"type":"invoke","process":1,"f":"read","key":"k","time":1420000000}
{"index":3,"type":"ok","process":1,"f":"read","key":"k","value":12,"time":1430000000}
{"index":4,"type":"info","process":-1,"f":"start","time":1520000000,"fault":"pause-holder","targets":["worker-1"]}
{"index":5,"type":"invoke","process":3,"f":"acquire","key":"k","time":1600000000}
{"index":6,"type":"ok","process":3,"f":"acquire","key":"k","time":3430000000}
{"index":7,"type":"invoke","process":3,"f":"read","key":"k","time":3440000000}
{"index":8,"type":"ok","process":3,"f":"read","key":"k","value":12,"time":3450000000}
{"index":9,"type":"invoke","process":3,"f":"write","key":"k","value":13,"time":3460000000}
{"index":10,"type":"ok","process":3,"f":"write","key":"k","value":13,"time":3470000000}
{"index":11,"type":"info","process":-1,"f":"stop","time":3900000000,"fault":"pause-holder","targets":["worker-1"]}
{"index":12,"type":"invoke","process":1,"f":"write","key":"k","value":13,"time":3950000000}
{"index":13,"type":"ok","process":1,"f":"write","key":"k","value":13,"time":3960000000}
{"index":14,"type":"invoke","process":3,"f":"release","key":"k","time":3970000000}
{"index":15,"type":"ok","process":3,"f":"release","key":"k","time":3980000000}
{"index":16,"type":"invoke","process":1,"f":"release","key":"k","time":3990000000}
{"index":17,"type":"fail","process":1,"f":"release","key":"k","time":4000000000,"error":"not-held"}
`, 2 * time.Second, []string{
			"p1 was granted the lock at 0.41 s and read 12.",
			"p1 was paused (pause-holder) at 0.52 s.",
			"p1's TTL of 2s ran out at 2.41 s.",
			"p3 was granted the lock at 2.43 s and wrote 13.",
			"p1 resumed at 2.90 s.",
			"p1 wrote 13 at 2.95 s, and the storage accepted it.",
			"p1 and p3 both wrote 13: 1 update lost.",
		}},
		{"a waiter paused past its lease, told it holds the lock while another does", `
{"index":0,"type":"invoke","process":4,"f":"acquire","key":"k","time":1500000000}
{"index":1,"type":"info","process":-1,"f":"start","time":1670000000,"fault":"pause-client","targets":["worker-4"]}
{"index":2,"type":"info","process":-1,"f":"stop","time":4150000000,"fault":"pause-client","targets":["worker-4"]}
{"index":3,"type":"invoke","process":0,"f":"acquire","key":"k","time":4700000000}
{"index":4,"type":"ok","process":0,"f":"acquire","key":"k","time":4800000000}
{"index":5,"type":"ok","process":4,"f":"acquire","key":"k","time":4890000000}
{"index":6,"type":"invoke","process":0,"f":"release","key":"k","time":4990000000}
{"index":7,"type":"ok","process":0,"f":"release","key":"k","time":5000000000}
{"index":8,"type":"invoke","process":4,"f":"release","key":"k","time":5090000000}
{"index":9,"type":"ok","process":4,"f":"release","key":"k","time":5100000000}
`, 2 * time.Second, []string{
			"p0 was granted the lock at 3.30 s.",
			"p4 had asked for the lock at 0.00 s and was paused (pause-client) at 0.17 s, until 2.65 s.",
			"p4 was granted the lock at 3.39 s, 1.91 s before p0's TTL ran out.",
			"p0 and p4 both held the lock for 100ms.",
		}},
		{"a paused holder's hazards, recorded late", `
{"index":0,"type":"invoke","process":1,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":1,"f":"acquire","key":"k","time":1410000000}
{"index":2,"type":"info","process":-1,"f":"start","time":1520000000,"fault":"pause-holder","targets":["worker-1"]}
{"index":3,"type":"invoke","process":3,"f":"acquire","key":"k","time":1600000000}
{"index":4,"type":"ok","process":3,"f":"acquire","key":"k","time":3430000000}
{"index":5,"type":"info","process":-1,"f":"hazard","time":3430000000,"fault":"pause-holder","targets":["worker-1","worker-3"],"hazard":"granted-in-pause","detail":{"granted":"worker-3 #4","holder":"worker-1 #1"}}
{"index":6,"type":"info","process":-1,"f":"stop","time":3900000000,"fault":"pause-holder","targets":["worker-1"]}
{"index":7,"type":"info","process":-1,"f":"hazard","time":3410000000,"fault":"pause-holder","targets":["worker-1"],"hazard":"lease-expired-in-pause","detail":{"holder":"worker-1 #1","thawed":"490ms later"}}
{"index":8,"type":"info","process":-1,"f":"hazard","time":3500000000,"fault":"pause-holder","targets":["worker-1","worker-2"],"hazard":"granted-in-pause","detail":{"granted":"worker-2 #9","holder":"worker-1 #1"}}
{"index":9,"type":"invoke","process":1,"f":"release","key":"k","time":3990000000}
{"index":10,"type":"fail","process":1,"f":"release","key":"k","time":4000000000,"error":"not-held"}
{"index":11,"type":"invoke","process":3,"f":"release","key":"k","time":4010000000}
{"index":12,"type":"ok","process":3,"f":"release","key":"k","time":4020000000}
`, 2 * time.Second, []string{
			"p1 was granted the lock at 0.41 s.",
			"p1 was paused (pause-holder) at 0.52 s.",
			"p1's TTL of 2s ran out at 2.41 s.",
			"p3 was granted the lock at 2.43 s.",
			"pause-holder recorded its hazard at 2.41 s: a lease expired in a pause (lease-expired-in-pause), involving p1.",
			"pause-holder recorded its hazard at 2.43 s: a grant while its holder was paused (granted-in-pause), involving p1 and p3.",
			"p1 resumed at 2.90 s.",
			"p1 and p3 both held the lock for 560ms.",
		}},
		{"a frozen waiter granted with its lease gone (etcd 3.4)", `
{"index":0,"type":"invoke","process":0,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":0,"f":"acquire","key":"k","time":1100000000}
{"index":2,"type":"invoke","process":2,"f":"acquire","key":"k","time":1200000000}
{"index":3,"type":"info","process":-1,"f":"start","time":1400000000,"fault":"pause-waiter","targets":["worker-2"]}
{"index":4,"type":"invoke","process":0,"f":"release","key":"k","time":1500000000}
{"index":5,"type":"ok","process":0,"f":"release","key":"k","time":1510000000}
{"index":6,"type":"invoke","process":1,"f":"acquire","key":"k","time":1600000000}
{"index":7,"type":"ok","process":1,"f":"acquire","key":"k","time":3500000000}
{"index":8,"type":"info","process":-1,"f":"hazard","time":3500000000,"fault":"pause-waiter","targets":["worker-2","worker-1"],"hazard":"waiter-lapsed","detail":{"granted":"worker-1 #7","frozen for":"2.1s","lease":"2s"}}
{"index":9,"type":"invoke","process":1,"f":"read","key":"k","time":3510000000}
{"index":10,"type":"ok","process":1,"f":"read","key":"k","value":5,"time":3520000000}
{"index":11,"type":"info","process":-1,"f":"stop","time":3600000000,"fault":"pause-waiter","targets":["worker-2"]}
{"index":12,"type":"ok","process":2,"f":"acquire","key":"k","time":3620000000}
{"index":13,"type":"invoke","process":1,"f":"write","key":"k","value":6,"time":3630000000}
{"index":14,"type":"ok","process":1,"f":"write","key":"k","value":6,"time":3640000000}
{"index":15,"type":"invoke","process":2,"f":"write","key":"k","value":6,"time":3650000000}
{"index":16,"type":"ok","process":2,"f":"write","key":"k","value":6,"time":3660000000}
{"index":17,"type":"invoke","process":1,"f":"release","key":"k","time":3700000000}
{"index":18,"type":"ok","process":1,"f":"release","key":"k","time":3710000000}
{"index":19,"type":"invoke","process":2,"f":"release","key":"k","time":3800000000}
{"index":20,"type":"fail","process":2,"f":"release","key":"k","time":3810000000,"error":"not-held"}
`, 2 * time.Second, []string{
			"p2 was frozen at 0.40 s while it waited for the lock (pause-waiter); its lease of 2s ran out at 2.40 s.",
			"p1 was granted the lock at 2.50 s and read 5.",
			"p2 went on at 2.60 s and was granted the lock at 2.62 s while p1 still held it, though its lease had run out while it was frozen; it wrote 6.",
			"p1 wrote 6 at 2.63 s, and the storage accepted it.",
			"p1 and p2 both wrote 6: 1 update lost.",
		}},
		{"a latch that leads on its lost session's node after an outage (Curator 5.4)", `
{"index":0,"type":"invoke","process":0,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"info","process":-1,"f":"start","time":1200000000,"fault":"outage","targets":["n1","n2","n3"],"detail":{"down for":"4s"}}
{"index":2,"type":"info","process":-1,"f":"stop","time":8200000000,"fault":"outage","targets":["n1","n2","n3"]}
{"index":3,"type":"ok","process":0,"f":"acquire","key":"k","token":6,"time":9000000000}
{"index":4,"type":"info","process":-1,"f":"hazard","time":9000000000,"fault":"outage","targets":["worker-0"],"hazard":"granted-after-outage","detail":{"granted":"worker-0 #3 token 6","down for":"7s","since back":"800ms","lease":"2s"}}
{"index":5,"type":"invoke","process":0,"f":"read","key":"k","time":9010000000}
{"index":6,"type":"ok","process":0,"f":"read","key":"k","value":5,"time":9020000000}
{"index":7,"type":"invoke","process":1,"f":"acquire","key":"k","time":9100000000}
{"index":8,"type":"ok","process":1,"f":"acquire","key":"k","token":10,"time":10300000000}
{"index":9,"type":"info","process":-1,"f":"hazard","time":10300000000,"fault":"outage","targets":["worker-1"],"hazard":"granted-after-outage","detail":{"granted":"worker-1 #8 token 10","down for":"7s","since back":"2.1s","lease":"2s"}}
{"index":10,"type":"invoke","process":0,"f":"release","key":"k","time":10500000000}
{"index":11,"type":"ok","process":0,"f":"release","key":"k","time":10510000000}
{"index":12,"type":"invoke","process":1,"f":"release","key":"k","time":11300000000}
{"index":13,"type":"ok","process":1,"f":"release","key":"k","time":11310000000}
`, 2 * time.Second, []string{
			"Every node went down at 0.20 s (outage), and the first served again at 7.20 s: down 7.00 s, past the lease of 2s, so each client saw its session run out and opened a new one, while the servers, started again on their disks, kept the old sessions and their lock nodes for one more lease.",
			"p0 was granted the lock (token 6) at 8.00 s and read 5.",
			"p1 was granted the lock (token 10) at 9.30 s, 0.70 s before p0's TTL ran out.",
			"p0 and p1 both held the lock for 200ms.",
		}},
		{"two libraries on one lock", `
{"index":0,"type":"invoke","process":0,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":0,"f":"acquire","key":"k","token":41,"time":1100000000,"detail":{"client":"zk-recipe-lib"}}
{"index":2,"type":"invoke","process":1,"f":"acquire","key":"k","time":1200000000}
{"index":3,"type":"ok","process":1,"f":"acquire","key":"k","token":42,"time":1300000000,"detail":{"client":"exec","node":"ab__lock__0000000042"}}
{"index":4,"type":"invoke","process":1,"f":"release","key":"k","time":1400000000}
{"index":5,"type":"ok","process":1,"f":"release","key":"k","time":1410000000}
{"index":6,"type":"invoke","process":0,"f":"release","key":"k","time":1500000000}
{"index":7,"type":"ok","process":0,"f":"release","key":"k","time":1510000000}
`, 0, []string{
			"p0 was granted the lock (token 41) through zk-recipe-lib at 0.10 s.",
			"p1 was granted the lock (token 42) through exec at 0.30 s, while p0 still held it.",
			"p0 and p1 both held the lock for 100ms.",
		}},
		{"a fenced holder refused", `
{"index":0,"type":"invoke","process":1,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":1,"f":"acquire","key":"k","token":7,"time":1410000000}
{"index":2,"type":"invoke","process":1,"f":"read","key":"k","token":7,"time":1420000000}
{"index":3,"type":"ok","process":1,"f":"read","key":"k","token":7,"value":12,"time":1430000000}
{"index":4,"type":"info","process":-1,"f":"start","time":1520000000,"fault":"pause-holder","targets":["worker-1"]}
{"index":5,"type":"invoke","process":3,"f":"acquire","key":"k","time":1600000000}
{"index":6,"type":"ok","process":3,"f":"acquire","key":"k","token":8,"time":3430000000}
{"index":7,"type":"invoke","process":3,"f":"write","key":"k","token":8,"value":13,"time":3460000000}
{"index":8,"type":"ok","process":3,"f":"write","key":"k","token":8,"value":13,"time":3470000000}
{"index":9,"type":"info","process":-1,"f":"stop","time":3900000000,"fault":"pause-holder","targets":["worker-1"]}
{"index":10,"type":"invoke","process":1,"f":"write","key":"k","token":7,"value":13,"time":3950000000}
{"index":11,"type":"fail","process":1,"f":"write","key":"k","token":7,"value":13,"time":3960000000,"error":"stale-token"}
`, 2 * time.Second, []string{
			"p1 was granted the lock (token 7) at 0.41 s and read 12.",
			"p1 was paused (pause-holder) at 0.52 s.",
			"p1's TTL of 2s ran out at 2.41 s.",
			"p3 was granted the lock (token 8) at 2.43 s and wrote 13.",
			"p1 resumed at 2.90 s.",
			"p1 wrote 13 with token 7 at 2.95 s, and the storage refused it as stale.",
		}},
		{"a crashed node grants again within the lease", `
{"index":0,"type":"invoke","process":0,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":0,"f":"acquire","key":"k","time":1100000000}
{"index":2,"type":"invoke","process":0,"f":"read","key":"k","time":1110000000}
{"index":3,"type":"ok","process":0,"f":"read","key":"k","value":4,"time":1120000000}
{"index":4,"type":"info","process":-1,"f":"start","time":1130000000,"fault":"pause-in-lease","targets":["worker-0"]}
{"index":5,"type":"info","process":-1,"f":"start","time":1140000000,"fault":"kill-node","targets":["n1"]}
{"index":6,"type":"info","process":-1,"f":"hazard","time":1150000000,"fault":"kill-node","targets":["n1","worker-0"],"hazard":"crash-under-grant"}
{"index":7,"type":"info","process":-1,"f":"stop","time":1400000000,"fault":"kill-node","targets":["n1"]}
{"index":8,"type":"invoke","process":2,"f":"acquire","key":"k","time":1410000000}
{"index":9,"type":"ok","process":2,"f":"acquire","key":"k","time":1500000000}
{"index":10,"type":"invoke","process":2,"f":"release","key":"k","time":1600000000}
{"index":11,"type":"ok","process":2,"f":"release","key":"k","time":1610000000}
{"index":12,"type":"info","process":-1,"f":"stop","time":2000000000,"fault":"pause-in-lease","targets":["worker-0"]}
{"index":13,"type":"invoke","process":0,"f":"release","key":"k","time":2010000000}
{"index":14,"type":"ok","process":0,"f":"release","key":"k","time":2020000000}
`, 2 * time.Second, []string{
			"p0 was granted the lock at 0.10 s and read 4.",
			"p0 was paused (pause-in-lease) at 0.13 s.",
			"n1 was killed (kill-node) at 0.14 s.",
			"n1 served again at 0.40 s.",
			"p2 was granted the lock at 0.50 s, 1.60 s before p0's TTL ran out.",
			"p0 resumed at 1.00 s.",
			"p0 and p2 both held the lock for 100ms.",
		}},
		{"a node's power lost within the lease", `
{"index":0,"type":"invoke","process":0,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":0,"f":"acquire","key":"k","time":1100000000}
{"index":2,"type":"invoke","process":0,"f":"read","key":"k","time":1110000000}
{"index":3,"type":"ok","process":0,"f":"read","key":"k","value":4,"time":1120000000}
{"index":4,"type":"info","process":-1,"f":"start","time":1130000000,"fault":"pause-in-lease","targets":["worker-0"]}
{"index":5,"type":"info","process":-1,"f":"start","time":1140000000,"fault":"power-loss","targets":["n1"],"detail":{"lost":"31 unsynced bytes of appendonlydir/appendonly.aof.1.incr.aof"}}
{"index":6,"type":"info","process":-1,"f":"stop","time":1400000000,"fault":"power-loss","targets":["n1"]}
{"index":7,"type":"invoke","process":2,"f":"acquire","key":"k","time":1410000000}
{"index":8,"type":"ok","process":2,"f":"acquire","key":"k","time":1500000000}
{"index":9,"type":"invoke","process":2,"f":"release","key":"k","time":1600000000}
{"index":10,"type":"ok","process":2,"f":"release","key":"k","time":1610000000}
{"index":11,"type":"info","process":-1,"f":"stop","time":2000000000,"fault":"pause-in-lease","targets":["worker-0"]}
{"index":12,"type":"invoke","process":0,"f":"release","key":"k","time":2010000000}
{"index":13,"type":"ok","process":0,"f":"release","key":"k","time":2020000000}
`, 2 * time.Second, []string{
			"p0 was granted the lock at 0.10 s and read 4.",
			"p0 was paused (pause-in-lease) at 0.13 s.",
			"n1 lost its power (power-loss) at 0.14 s, and its disk lost 31 unsynced bytes of appendonlydir/appendonly.aof.1.incr.aof.",
			"n1 served again at 0.40 s.",
			"p2 was granted the lock at 0.50 s, 1.60 s before p0's TTL ran out.",
			"p0 resumed at 1.00 s.",
			"p0 and p2 both held the lock for 100ms.",
		}},
		{"a delayed holder's late write", `
{"index":0,"type":"invoke","process":1,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":1,"f":"acquire","key":"k","time":1410000000}
{"index":2,"type":"invoke","process":1,"f":"read","key":"k","time":1420000000}
{"index":3,"type":"ok","process":1,"f":"read","key":"k","value":12,"time":1430000000}
{"index":4,"type":"info","process":-1,"f":"start","time":1440000000,"fault":"delay","targets":["worker-1"],"detail":{"delay":"2s"}}
{"index":5,"type":"invoke","process":3,"f":"acquire","key":"k","time":1600000000}
{"index":6,"type":"ok","process":3,"f":"acquire","key":"k","time":3430000000}
{"index":7,"type":"invoke","process":3,"f":"read","key":"k","time":3440000000}
{"index":8,"type":"ok","process":3,"f":"read","key":"k","value":12,"time":3450000000}
{"index":9,"type":"invoke","process":1,"f":"write","key":"k","value":13,"time":3455000000}
{"index":10,"type":"invoke","process":3,"f":"write","key":"k","value":13,"time":3460000000}
{"index":11,"type":"ok","process":3,"f":"write","key":"k","value":13,"time":3470000000}
{"index":12,"type":"ok","process":1,"f":"write","key":"k","value":13,"time":3480000000}
{"index":13,"type":"info","process":-1,"f":"stop","time":5440000000,"fault":"delay","targets":["worker-1"],"detail":{"delay":"2s"}}
`, 2 * time.Second, []string{
			"p1 was granted the lock at 0.41 s and read 12.",
			"p1 had everything it sent delayed (delay) at 0.44 s.",
			"p1's TTL of 2s ran out at 2.41 s.",
			"p3 was granted the lock at 2.43 s and wrote 13.",
			"p1 wrote 13 at 2.46 s, and the storage accepted it.",
			"p1 and p3 both wrote 13: 1 update lost.",
		}},
		{"a holder's write held in the network (delay-holder), fenced", `
{"index":0,"type":"invoke","process":4,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":4,"f":"acquire","key":"k","time":1840000000,"token":15}
{"index":2,"type":"invoke","process":4,"f":"read","key":"k","time":1841000000,"token":15}
{"index":3,"type":"ok","process":4,"f":"read","key":"k","value":14,"time":1842000000,"token":15}
{"index":4,"type":"invoke","process":4,"f":"write","key":"k","value":15,"time":1940000000,"token":15}
{"index":5,"type":"info","process":-1,"f":"start","time":1940500000,"fault":"delay-holder","targets":["worker-4"],"detail":{"holder":"worker-4 #1","write":"15"}}
{"index":6,"type":"invoke","process":0,"f":"acquire","key":"k","time":2000000000}
{"index":7,"type":"ok","process":0,"f":"acquire","key":"k","time":3870000000,"token":16}
{"index":8,"type":"invoke","process":0,"f":"read","key":"k","time":3871000000,"token":16}
{"index":9,"type":"ok","process":0,"f":"read","key":"k","value":14,"time":3872000000,"token":16}
{"index":10,"type":"invoke","process":0,"f":"write","key":"k","value":15,"time":3970000000,"token":16}
{"index":11,"type":"ok","process":0,"f":"write","key":"k","value":15,"time":3971000000,"token":16,"effect_from":3970500000,"effect_to":3970500000}
{"index":12,"type":"info","process":-1,"f":"hazard","time":3972000000,"fault":"delay-holder","targets":["worker-4","worker-0"],"hazard":"late-write","detail":{"held":"2.03s","holder":"worker-4 #1 token 15","written":"worker-0 wrote 15"}}
{"index":13,"type":"info","process":-1,"f":"stop","time":3972100000,"fault":"delay-holder","targets":["worker-4"],"detail":{"holder":"worker-4 #1","write":"15"}}
{"index":14,"type":"fail","process":4,"f":"write","key":"k","value":15,"time":3973000000,"token":15,"error":"stale-token","effect_from":3972500000,"effect_to":3972500000}
{"index":15,"type":"invoke","process":4,"f":"release","key":"k","time":3974000000}
{"index":16,"type":"fail","process":4,"f":"release","key":"k","time":3975000000,"error":"not-held"}
`, 2 * time.Second, []string{
			"p4 was granted the lock (token 15) at 0.84 s and read 14.",
			"p4 had its write held in the network (delay-holder) at 0.94 s.",
			"p4's TTL of 2s ran out at 2.84 s.",
			"p0 was granted the lock (token 16) at 2.87 s and wrote 15.",
			"delay-holder recorded its hazard at 2.97 s: a write delivered after its lease and another's write (late-write), involving p4 and p0.",
			"p4 wrote 15 with token 15 at 0.94 s, sent before p0's grant and received by the storage at 2.97 s, and the storage refused it as stale.",
		}},
		{"a pooler hands the holder's session to another client", `
{"index":0,"type":"invoke","process":0,"f":"acquire","key":"k","time":1000000000}
{"index":1,"type":"ok","process":0,"f":"acquire","key":"k","time":1040000000,"detail":{"backend":"1234"}}
{"index":2,"type":"invoke","process":0,"f":"read","key":"k","time":1050000000}
{"index":3,"type":"ok","process":0,"f":"read","key":"k","value":0,"time":1052000000}
{"index":4,"type":"invoke","process":3,"f":"acquire","key":"k","time":1055000000}
{"index":5,"type":"ok","process":3,"f":"acquire","key":"k","time":1060000000,"detail":{"backend":"1234"}}
{"index":6,"type":"info","process":-1,"f":"hazard","time":1060000000,"fault":"pgbouncer-transaction","targets":["worker-0","worker-3"],"hazard":"pooled-session","detail":{"backend":"1234","granted":"worker-3 #5","holder":"worker-0 #1"}}
{"index":7,"type":"invoke","process":3,"f":"write","key":"k","value":1,"time":1070000000}
{"index":8,"type":"ok","process":3,"f":"write","key":"k","value":1,"time":1072000000}
{"index":9,"type":"invoke","process":0,"f":"write","key":"k","value":1,"time":1150000000}
{"index":10,"type":"ok","process":0,"f":"write","key":"k","value":1,"time":1152000000}
`, 0, []string{
			"p0 was granted the lock at 0.04 s and read 0.",
			"p3 was granted the lock at 0.06 s and wrote 1, while p0 still held it.",
			"p0's lock was taken on server backend 1234, which pgbouncer-transaction then handed to p3: p3's lock statement ran " +
				"in the session that already held the lock, and the server granted it again.",
			"p0 wrote 1 at 0.15 s, and the storage accepted it.",
			"p0 and p3 both wrote 1: 1 update lost.",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file, err := history.Parse(strings.NewReader(strings.TrimSpace(tt.history) + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			events := file.Events
			o := firstOverlap(t, events)
			got := Tell(o, events, tt.ttl, events[0].Time)
			var texts []string
			for _, s := range got {
				texts = append(texts, s.Text)
				if s.Event < 0 || s.Event >= len(events) {
					t.Errorf("%q tells of event %d, not in the history", s.Text, s.Event)
				}
			}
			if strings.Join(texts, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("story:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// Every fault kind a history records is told in its own words, never as "was struck":
// the story reads them from the kind's declaration (history.FaultKind), so a nemesis's
// name and the story's cannot drift apart again (delay was once told as "delay-client").
func TestEveryFaultKindIsToldInItsWords(t *testing.T) {
	for _, k := range history.FaultKinds() {
		for _, fault := range []string{k.Name, k.With("n1|n2,n3")} {
			if got := struck(fault); got != k.Struck || got == "was struck" {
				t.Errorf("a %s fault struck: %q, want %q", fault, got, k.Struck)
			}
			if got := back(fault); got != k.Back {
				t.Errorf("a %s fault's stop: %q, want %q", fault, got, k.Back)
			}
		}
	}
	if got := struck("meteor n1"); got != "was struck" {
		t.Errorf("a fault of no kind: %q", got)
	}
}

// A window that lacks the overlap's grants tells nothing rather than a wrong story.
func TestTellsNothingWithoutTheGrants(t *testing.T) {
	o := checkers.Overlap{Key: "k", Earlier: checkers.Holding{Process: 1, Granted: 5, Until: 9}, Later: checkers.Holding{Process: 2, Granted: 7, Until: 9}}
	if got := Tell(o, nil, time.Second, 0); got != nil {
		t.Errorf("story of no events: %v", got)
	}
}

// The recorder numbers events as they reach it, so the earlier hold's grant may come
// second in the file (issue 35): the window opens at whichever grant comes first.
func TestWindowHoldsBothGrants(t *testing.T) {
	for _, o := range []checkers.Overlap{
		{Key: "k", Earlier: checkers.Holding{Process: 0, Granted: 3, Until: 13}, Later: checkers.Holding{Process: 1, Granted: 2, Until: 15}},
		{Key: "k", Earlier: checkers.Holding{Process: 0, Granted: 2, Until: 9}, Later: checkers.Holding{Process: 1, Granted: 5, Until: 7}},
	} {
		from, to := Window(o)
		for _, i := range []int{o.Earlier.Granted, o.Later.Granted, o.Earlier.Until, o.Later.Until} {
			if i < from || i > to {
				t.Errorf("window %d..%d of %+v lacks event %d", from, to, o, i)
			}
		}
	}
}

func firstOverlap(t *testing.T, events []history.Event) checkers.Overlap {
	t.Helper()
	for _, r := range checkers.Judge(context.Background(), events, checkers.Options{}) {
		if r.Checker == "mutual-exclusion" && len(r.Overlaps) > 0 {
			return r.Overlaps[0]
		}
	}
	t.Fatal("mutual exclusion found no overlap in the history")
	return checkers.Overlap{}
}
