// Package machinestest is an SSH server in the test's process that plays a machine, for
// the tests of the machines package and of the commands that reach machines: it answers
// the few commands they send (it is no shell), serves SFTP on the real file system, and
// counts the sessions open at once.
package machinestest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gssh "github.com/gliderlabs/ssh"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/internal/sshkey"
)

// Server is one machine. Its fields may be changed between commands.
type Server struct {
	// Host and Port are where it listens.
	Host    string
	Port    int
	HostKey ssh.Signer
	// allowed is the public key it lets in.
	allowed ssh.PublicKey
	// Sudo says whether sudo -n works; Password is the one sudo -S takes.
	Sudo     bool
	Password string
	// Missing are the tools a tools check reports; Skew is how far its clock is off;
	// NoClockRights leaves CAP_SYS_TIME out of root's capabilities, as in a container;
	// NoFUSE, /dev/fuse out of its devices.
	Missing       []string
	Skew          time.Duration
	NoClockRights bool
	NoFUSE        bool
	// Listening are the lines its listing of the ports in use prints: ss -ltnpH's, then
	// "# group PID PGID" and "# lockbreaker PGID" lines. None: no port is in use.
	Listening []string
	// Installs counts the package installs asked of it: the one change a preflight makes.
	Installs atomic.Int32

	// Open and MaxOpen count the sessions open now and at most.
	Open, MaxOpen atomic.Int32
	// Started gets a blocking command's name ("hold", "block") once it runs; a token on
	// Release lets one "hold" end.
	Started chan string
	Release chan struct{}

	mu    sync.Mutex
	conns []net.Conn
}

// Key makes an ed25519 key pair: the signer, and the private key written to a file.
func Key(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "id_ed25519")
	signer, err := sshkey.Write(file, "")
	if err != nil {
		t.Fatal(err)
	}
	return signer, file
}

// Serve starts a machine that lets client in, sudo working without a password. It stops
// when the test ends.
func Serve(t *testing.T, client ssh.PublicKey) *Server {
	t.Helper()
	hostKey, _ := Key(t)
	s := &Server{HostKey: hostKey, allowed: client, Sudo: true, Started: make(chan string, 16), Release: make(chan struct{}, 16)}
	srv := &gssh.Server{
		Handler: s.handle,
		PublicKeyHandler: func(_ gssh.Context, k gssh.PublicKey) bool {
			return string(k.Marshal()) == string(s.allowed.Marshal())
		},
		SubsystemHandlers: map[string]gssh.SubsystemHandler{"sftp": func(sess gssh.Session) {
			if srv, err := sftp.NewServer(sess); err == nil {
				srv.Serve()
			}
		}},
		ConnCallback: func(_ gssh.Context, c net.Conn) net.Conn {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.conns = append(s.conns, c)
			return c
		},
	}
	srv.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.Host, s.Port = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	return s
}

// Address is where it listens, as a machines file names it, with user tester.
func (s *Server) Address() string { return fmt.Sprintf("tester@%s:%d", s.Host, s.Port) }

// DropConnections closes every connection the server has: the network broke.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

func (s *Server) handle(sess gssh.Session) {
	n := s.Open.Add(1)
	defer s.Open.Add(-1)
	for m := s.MaxOpen.Load(); n > m && !s.MaxOpen.CompareAndSwap(m, n); m = s.MaxOpen.Load() {
	}
	sess.Exit(s.run(sess, sess.RawCommand(), bufio.NewReader(sess)))
}

// run answers one command and says its exit code: echo hi, exit 3, hold, block, true,
// date +%s%N, root's capabilities (grep '^CapEff:'), /dev/fuse (test -c), the ports in use
// (listening=$(ss -ltnpH) ...), a package install (missing= ...), a tools check (for t in
// ...), and any of them through sudo.
func (s *Server) run(sess gssh.Session, cmd string, in *bufio.Reader) int {
	switch {
	case cmd == "echo hi":
		io.WriteString(sess, "hi\n")
	case cmd == "exit 3":
		io.WriteString(sess.Stderr(), "warming up\nit failed\n")
		return 3
	case cmd == "hold":
		s.Started <- cmd
		select {
		case <-s.Release:
		case <-sess.Context().Done():
		}
	case cmd == "block":
		s.Started <- cmd
		<-sess.Context().Done()
	case cmd == "date +%s%N":
		fmt.Fprintln(sess, time.Now().Add(s.Skew).UnixNano())
	case cmd == "grep '^CapEff:' /proc/self/status":
		caps := "000001ffffffffff"
		if s.NoClockRights {
			caps = "00000000a80425fb" // Docker's default
		}
		fmt.Fprintln(sess, "CapEff:\t"+caps)
	case cmd == "test -c /dev/fuse":
		if s.NoFUSE {
			return 1
		}
	case strings.HasPrefix(cmd, "listening=$(ss -ltnpH)"):
		for _, l := range s.Listening {
			fmt.Fprintln(sess, l)
		}
	case strings.HasPrefix(cmd, "missing=\n"):
		s.Installs.Add(1)
	case strings.HasPrefix(cmd, "for t in "):
		for _, t := range s.Missing {
			fmt.Fprintln(sess, t)
		}
	case strings.HasPrefix(cmd, "sudo -n -- sh -c "), strings.HasPrefix(cmd, "sudo -S -p '' -- sh -c "):
		words, err := shellwords.Split(cmd)
		if err != nil {
			return 2
		}
		password, _ := in.ReadString('\n')
		if !s.Sudo && (s.Password == "" || strings.TrimSpace(password) != s.Password) {
			io.WriteString(sess.Stderr(), "sudo: a password is required\n")
			return 1
		}
		return s.run(sess, words[len(words)-1], in)
	case cmd == "true":
	default:
		fmt.Fprintf(sess.Stderr(), "sh: %s: not found\n", cmd)
		return 127
	}
	return 0
}
