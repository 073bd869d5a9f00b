// Command leased is the example lease lock server of examples/own-service: a lease table
// in memory, one lease per key, each grant numbered by a counter that only grows (the
// fencing token), served over TCP one line per request:
//
//	PING                          -> PONG
//	ACQUIRE <key> <owner> <ttl_ms> -> GRANTED <token> | BUSY
//	RELEASE <key> <owner> <token>  -> RELEASED | NOTHELD
//	ROLE                          -> leader (it is alone)
//
// A lease runs out ttl_ms after its grant by the server's monotonic clock; its holder is
// not told. Nothing is kept on disk: a server killed and started again has forgotten its
// leases and counts tokens from 1 again. It is a Go program, so lockbreaker's clock
// faults cannot move its clock, and says so.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

type lease struct {
	owner   string
	token   uint64
	expires time.Time
}

type table struct {
	mu     sync.Mutex
	leases map[string]lease
	tokens uint64
}

func (t *table) acquire(key, owner string, ttl time.Duration) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if l, ok := t.leases[key]; ok && now.Before(l.expires) {
		return 0, false
	}
	t.tokens++
	t.leases[key] = lease{owner: owner, token: t.tokens, expires: now.Add(ttl)}
	return t.tokens, true
}

func (t *table) release(key, owner string, token uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.leases[key]
	if !ok || l.owner != owner || l.token != token || !time.Now().Before(l.expires) {
		return false
	}
	delete(t.leases, key)
	return true
}

func (t *table) answer(line string) string {
	f := strings.Fields(line)
	switch {
	case len(f) == 1 && f[0] == "PING":
		return "PONG"
	case len(f) == 1 && f[0] == "ROLE":
		return "leader"
	case len(f) == 4 && f[0] == "ACQUIRE":
		ms, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || ms <= 0 {
			return "ERR ttl_ms"
		}
		if token, ok := t.acquire(f[1], f[2], time.Duration(ms)*time.Millisecond); ok {
			log.Printf("grant %s to %s, token %d, %d ms", f[1], f[2], token, ms)
			return "GRANTED " + strconv.FormatUint(token, 10)
		}
		return "BUSY"
	case len(f) == 4 && f[0] == "RELEASE":
		token, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			return "ERR token"
		}
		if t.release(f[1], f[2], token) {
			return "RELEASED"
		}
		return "NOTHELD"
	}
	return "ERR unknown request"
}

func main() {
	listen := flag.String("listen", ":7070", "address to serve on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("leased serving on %s", ln.Addr())
	t := &table{leases: map[string]lease{}}
	for {
		conn, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer conn.Close()
			in := bufio.NewScanner(conn)
			for in.Scan() {
				if _, err := fmt.Fprintf(conn, "%s\n", t.answer(in.Text())); err != nil {
					return
				}
			}
		}()
	}
}
