package system

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every member knows the whole static cluster by name, and its own URLs are its name's.
func TestEtcdMembersStartFromAStaticCluster(t *testing.T) {
	s, _ := Lookup("etcd")
	cmd := s.Container.Node(Cluster{Nodes: 5, TTL: 2 * time.Second}, 2).Cmd
	flag := func(name string) string {
		i := slices.Index(cmd, name)
		if i < 0 || i+1 >= len(cmd) {
			t.Fatalf("no %s in %q", name, cmd)
		}
		return cmd[i+1]
	}
	for name, want := range map[string]string{
		"--name":                        "n2",
		"--data-dir":                    "/lockbreaker/etcd",
		"--initial-advertise-peer-urls": "http://n2:2380",
		"--initial-cluster":             "n1=http://n1:2380,n2=http://n2:2380,n3=http://n3:2380,n4=http://n4:2380,n5=http://n5:2380",
		"--initial-cluster-state":       "new",
		"--election-timeout":            "1000",
	} {
		if got := flag(name); got != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
	if s.FixedClock == "" || s.Container.Image == nil || !slices.Contains(s.Container.Image.Packages, "etcd-server") {
		t.Errorf("etcd: want a fixed clock and an image with etcd-server: %+v", s)
	}
}

// A lease counts whole seconds, and etcd raises one under 1.5 election timeouts: the notes
// say so whenever the lease is not the TTL.
func TestEtcdLeaseAndItsNote(t *testing.T) {
	tests := []struct {
		ttl   time.Duration
		lease int64
		note  string
	}{
		{2 * time.Second, 2, "the clients ask for 2s"},
		{1500 * time.Millisecond, 2, "hold a 2s lease where --ttl says 1.5s"},
		{300 * time.Millisecond, 1, "hold a 2s lease where --ttl says 300ms"},
		{5 * time.Second, 5, "the clients ask for 5s"},
	}
	for _, tt := range tests {
		if got := EtcdLeaseTTL(tt.ttl); got != tt.lease {
			t.Errorf("EtcdLeaseTTL(%s) = %d, want %d", tt.ttl, got, tt.lease)
		}
		notes := etcdNotes(Cluster{Nodes: 3, TTL: tt.ttl})
		if len(notes) != 1 || !strings.Contains(notes[0], tt.note) {
			t.Errorf("TTL %s: notes %q, want %q", tt.ttl, notes, tt.note)
		}
		if tt.ttl == 5*time.Second && strings.Contains(notes[0], "where --ttl says") {
			t.Errorf("TTL %s: the lease is the TTL, yet the note says otherwise: %q", tt.ttl, notes[0])
		}
	}
}

// The server gives up on a silent client after about the TTL, in whole seconds, never
// under 2 s.
func TestPostgresKeepalivesFollowTheTTL(t *testing.T) {
	tests := []struct {
		ttl  time.Duration
		want []string
	}{
		{2 * time.Second, []string{"tcp_keepalives_idle = 1\n", "tcp_keepalives_interval = 1\n", "tcp_keepalives_count = 1\n", "tcp_user_timeout = 2000\n"}},
		{500 * time.Millisecond, []string{"tcp_keepalives_idle = 1\n", "tcp_keepalives_count = 1\n", "tcp_user_timeout = 2000\n"}},
		{5 * time.Second, []string{"tcp_keepalives_idle = 3\n", "tcp_keepalives_count = 2\n", "tcp_user_timeout = 5000\n"}},
		{10 * time.Second, []string{"tcp_keepalives_idle = 5\n", "tcp_keepalives_count = 5\n", "tcp_user_timeout = 10000\n"}},
	}
	s, _ := Lookup("postgres")
	for _, tt := range tests {
		setup := s.Container.Node(Cluster{Nodes: 1, TTL: tt.ttl}, 1)
		conf := setup.Files[0].Content
		for _, w := range append(tt.want, "listen_addresses = '*'\n", "hba_file = '/lockbreaker/pg/pg_hba.conf'\n") {
			if !strings.Contains(conf, w) {
				t.Errorf("TTL %s: postgresql.conf lacks %q:\n%s", tt.ttl, w, conf)
			}
		}
		if !slices.Contains(setup.Cmd, "config_file=/lockbreaker/pg/postgresql.conf") || !strings.Contains(strings.Join(setup.Cmd, " "), "setpriv --reuid=postgres") {
			t.Errorf("TTL %s: want postgres started as its user on the configuration: %q", tt.ttl, setup.Cmd)
		}
	}
	if notes := postgresNotes(Cluster{Nodes: 1, TTL: 2 * time.Second}); len(notes) != 1 || !strings.Contains(notes[0], "within about 2s") {
		t.Errorf("notes %q", notes)
	}
}

// The readiness probe sends a startup message and waits for ReadyForQuery; an error
// response ("the database system is starting up") is no readiness.
func TestPostgresServingReadsTheStartupReply(t *testing.T) {
	msg := func(kind byte, body string) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{kind}, uint32(4+len(body))), body...)
	}
	tests := []struct {
		name  string
		reply []byte
		err   string
	}{
		{"ready", slices.Concat(msg('R', "\x00\x00\x00\x00"), msg('S', "a\x00b\x00"), msg('Z', "I")), ""},
		{"starting up", msg('E', "SFATAL\x00C57P03\x00Mthe database system is starting up\x00\x00"), "the database system is starting up"},
		{"closed early", msg('R', "\x00\x00\x00\x00"), "EOF"},
	}
	for _, tt := range tests {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			head := make([]byte, 4)
			r := bufio.NewReader(conn)
			r.Read(head)
			body := make([]byte, binary.BigEndian.Uint32(head)-4)
			r.Read(body)
			got <- body
			conn.Write(tt.reply)
		}()
		err = postgresServing(context.Background(), ln.Addr().String())
		ln.Close()
		if body := <-got; !strings.Contains(string(body), "user\x00postgres\x00") {
			t.Errorf("%s: startup message %q", tt.name, body)
		}
		if (tt.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.err)
		}
	}
}

// A pooled node runs PgBouncer in the pool mode asked for, in front of the server, with
// a pool smaller than a run's clients; clients dial its port. An unpooled node is as it
// was: no pooler's files, the server's port.
func TestPostgresPoolerRunsInTheNodeWhenAsked(t *testing.T) {
	s, _ := Lookup("postgres")
	c := s.Container
	if got := c.ClientPort(""); got != 5432 {
		t.Errorf("client port without a pooler %d, want 5432", got)
	}
	plain := c.Node(Cluster{Nodes: 1, TTL: 2 * time.Second}, 1)
	for _, f := range plain.Files {
		if strings.Contains(f.Path, "pgbouncer") {
			t.Errorf("an unpooled node has the pooler's file %s", f.Path)
		}
	}
	for pooler, mode := range map[string]string{PgBouncerSession: "session", PgBouncerTransaction: "transaction"} {
		if got := c.ClientPort(pooler); got != 6432 {
			t.Errorf("%s: client port %d, want 6432", pooler, got)
		}
		setup := c.Node(Cluster{Nodes: 1, TTL: 2 * time.Second, Pooler: pooler}, 1)
		if !slices.Equal(setup.Cmd, plain.Cmd) {
			t.Errorf("%s: command %q, want the unpooled one (the pooler starts when its file is there)", pooler, setup.Cmd)
		}
		var conf string
		for _, f := range setup.Files {
			if f.Path == "/lockbreaker/pg/pgbouncer.ini" {
				conf = f.Content
			}
		}
		for _, want := range []string{"pool_mode = " + mode + "\n", "default_pool_size = 2\n", "listen_port = 6432\n",
			"* = host=127.0.0.1 port=5432\n", "tcp_user_timeout = 2000\n", "auth_type = trust\n"} {
			if !strings.Contains(conf, want) {
				t.Errorf("%s: pgbouncer.ini lacks %q:\n%s", pooler, want, conf)
			}
		}
		if notes := postgresNotes(Cluster{TTL: 2 * time.Second, Pooler: pooler}); len(notes) != 2 || !strings.Contains(notes[0], "pool_mode "+mode) {
			t.Errorf("%s: notes %q, want the pooler's first", pooler, notes)
		}
	}
	if !slices.Contains(c.Image.Packages, "pgbouncer") || !slices.Equal(PoolerModes(), []string{PgBouncerSession, PgBouncerTransaction}) {
		t.Errorf("packages %q, pooler modes %q", c.Image.Packages, PoolerModes())
	}
}
