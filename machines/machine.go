package machines

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/lockbreaker/lockbreaker/internal/shellwords"
)

// Login is how every machine is logged in to.
type Login struct {
	// User is the user of the addresses that name none.
	User string
	// KeyFile is a private key (unencrypted); Agent uses the keys of the ssh agent at
	// $SSH_AUTH_SOCK. At least one of the two.
	KeyFile string
	Agent   bool
	// SudoPassword is given to sudo when the user is not root; "" runs sudo -n, which
	// needs no password (NOPASSWD) or fails at once.
	SudoPassword string
	// KnownHosts is the known_hosts file host keys are checked against; "" checks none, for
	// machines made to be thrown away (the stand-ins).
	KnownHosts string
	// Timeout bounds dialing and the SSH handshake.
	Timeout time.Duration
	// MaxSessions bounds the sessions (commands, file transfers) open on one machine at
	// once; 0 is DefaultMaxSessions.
	MaxSessions int
}

// DefaultMaxSessions is below OpenSSH's MaxSessions (10 by default), as Jepsen's 6 is.
const DefaultMaxSessions = 6

// clientConfig is the SSH client configuration of login for user.
func (l Login) clientConfig(user string) (*ssh.ClientConfig, error) {
	var auth []ssh.AuthMethod
	if l.KeyFile != "" {
		pem, err := os.ReadFile(l.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("private key: %w", err)
		}
		signer, err := ssh.ParsePrivateKey(pem)
		if err != nil {
			return nil, fmt.Errorf("private key %s: %w", l.KeyFile, err)
		}
		auth = append(auth, ssh.PublicKeys(signer))
	}
	if l.Agent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, fmt.Errorf("ssh agent at SSH_AUTH_SOCK=%q: %w", sock, err)
		}
		auth = append(auth, ssh.PublicKeysCallback(agent.NewClient(conn).Signers))
	}
	if len(auth) == 0 {
		return nil, errors.New("no private key and no ssh agent to log in with")
	}
	hostKey := ssh.InsecureIgnoreHostKey() // the stand-ins, made for one run
	if l.KnownHosts != "" {
		var err error
		if hostKey, err = knownhosts.New(l.KnownHosts); err != nil {
			return nil, fmt.Errorf("known hosts: %w", err)
		}
	}
	timeout := l.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	return &ssh.ClientConfig{User: user, Auth: auth, HostKeyCallback: hostKey, Timeout: timeout}, nil
}

// Machine is one machine's connection. Its methods are safe for concurrent use; at most
// Login.MaxSessions of them have a session open at once, the others wait their turn.
type Machine struct {
	addr     Address
	login    Login
	config   *ssh.ClientConfig
	sessions chan struct{} // a token per open session

	mu     sync.Mutex
	client *ssh.Client // nil once broken: the next session dials again
}

// Dial logs in to the machine at addr.
func Dial(ctx context.Context, addr Address, login Login) (*Machine, error) {
	user := addr.User
	if user == "" {
		user = login.User
	}
	if user == "" {
		return nil, fmt.Errorf("machine %s: no user (name one in the file, user@host, or with the login)", addr)
	}
	addr.User = user
	config, err := login.clientConfig(user)
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", addr, err)
	}
	bound := login.MaxSessions
	if bound == 0 {
		bound = DefaultMaxSessions
	}
	m := &Machine{addr: addr, login: login, config: config, sessions: make(chan struct{}, bound)}
	if _, err := m.connect(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Name is the machine's address, user included.
func (m *Machine) Name() string { return m.addr.String() }

// connect returns the connection, dialing again when it broke.
func (m *Machine) connect(ctx context.Context) (*ssh.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.client != nil {
		return m.client, nil
	}
	d := net.Dialer{Timeout: m.config.Timeout}
	conn, err := d.DialContext(ctx, "tcp", m.addr.hostPort())
	if err != nil {
		return nil, fmt.Errorf("machine %s: cannot reach it: %w", m.addr, err)
	}
	// The handshake is bounded too: a port that accepts and never speaks SSH.
	conn.SetDeadline(time.Now().Add(m.config.Timeout))
	c, chans, reqs, err := ssh.NewClientConn(conn, m.addr.hostPort(), m.config)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("machine %s: cannot log in: %w", m.addr, err)
	}
	conn.SetDeadline(time.Time{})
	m.client = ssh.NewClient(c, chans, reqs)
	return m.client, nil
}

// broke forgets the connection c, which failed, so the next session dials again.
func (m *Machine) broke(c *ssh.Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.client == c {
		m.client.Close()
		m.client = nil
	}
}

// Close closes the connection.
func (m *Machine) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.client == nil {
		return nil
	}
	err := m.client.Close()
	m.client = nil
	return err
}

// session runs use with a session of its own, once the machine has a session to spare,
// dialing again once if the connection turns out broken. It gives up when ctx ends.
func (m *Machine) session(ctx context.Context, use func(*ssh.Session) error) error {
	select {
	case m.sessions <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("machine %s: waiting for a session: %w", m.addr, ctx.Err())
	}
	defer func() { <-m.sessions }()
	for try := 0; ; try++ {
		c, err := m.connect(ctx)
		if err != nil {
			return err
		}
		s, err := c.NewSession()
		if err != nil {
			m.broke(c)
			if try == 0 {
				continue
			}
			return fmt.Errorf("machine %s: open a session: %w", m.addr, err)
		}
		defer s.Close()
		return use(s)
	}
}

// Result is what a command wrote, and how it exited.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// ExitError is a command that ran and exited with a code other than 0.
type ExitError struct {
	Machine, Command string
	Result
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("machine %s: %s exited with %d", e.Machine, e.Command, e.ExitCode)
	if last := lastLine(e.Stderr); last != "" {
		msg += ": " + last
	}
	return msg
}

// lastLine is the last non-empty line of b.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Run runs command in the machine's shell with stdin (nil: none) and waits for it. A
// command that exits with another code than 0 returns its Result and an *ExitError. When
// ctx ends first, the command is sent SIGKILL (sshd passes it on where it allows signals)
// and its session closed; Run returns ctx's error.
func (m *Machine) Run(ctx context.Context, command string, stdin []byte) (Result, error) {
	var r Result
	err := m.session(ctx, func(s *ssh.Session) error {
		var stdout, stderr bytes.Buffer
		s.Stdout, s.Stderr = &stdout, &stderr
		if stdin != nil {
			s.Stdin = bytes.NewReader(stdin)
		}
		if err := s.Start(command); err != nil {
			return fmt.Errorf("machine %s: start %s: %w", m.addr, command, err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			s.Signal(ssh.SIGKILL)
			s.Close()
			<-done
			return fmt.Errorf("machine %s: %s: %w", m.addr, command, ctx.Err())
		}
		r = Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
		var exit *ssh.ExitError
		switch {
		case errors.As(err, &exit):
			r.ExitCode = exit.ExitStatus()
			return &ExitError{Machine: m.Name(), Command: command, Result: r}
		case err != nil: // the connection broke, or no exit status came
			return fmt.Errorf("machine %s: %s: %w", m.addr, command, err)
		}
		return nil
	})
	return r, err
}

// Sudo runs command as root: as it is for root, else through sudo, given the login's
// password on its stdin, or with -n when there is none.
func (m *Machine) Sudo(ctx context.Context, command string) (Result, error) {
	return m.sudoIn(ctx, command, nil)
}

// sudoIn runs command as root, as Sudo does, with stdin (nil: none) after the password.
func (m *Machine) sudoIn(ctx context.Context, command string, stdin []byte) (Result, error) {
	switch {
	case m.addr.User == "root":
		return m.Run(ctx, command, stdin)
	case m.login.SudoPassword != "":
		// sudo reads the password a byte at a time, up to its newline: the rest is stdin's.
		return m.Run(ctx, "sudo -S -p '' -- sh -c "+shellwords.Quote(command), append([]byte(m.login.SudoPassword+"\n"), stdin...))
	}
	return m.Run(ctx, "sudo -n -- sh -c "+shellwords.Quote(command), stdin)
}

// SudoWrite writes data to path as root, with mode, making its directory, through a file
// of its own renamed into place: for paths the login's user cannot write (Put's).
func (m *Machine) SudoWrite(ctx context.Context, path string, data []byte, mode os.FileMode) error {
	q := shellwords.Quote(path)
	_, err := m.sudoIn(ctx, fmt.Sprintf(`mkdir -p "$(dirname %[1]s)" && cat > %[1]s.new.$$ && chmod %[2]o %[1]s.new.$$ && mv -f %[1]s.new.$$ %[1]s`,
		q, mode.Perm()), data)
	return err
}

// Put writes data to path on the machine with mode, through a temporary file renamed
// into place, so that a reader never sees half of it.
func (m *Machine) Put(ctx context.Context, path string, data []byte, mode os.FileMode) error {
	return m.sftp(ctx, func(c *sftp.Client) error {
		tmp := path + ".lockbreaker-new"
		f, err := c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		if err := errors.Join(f.Chmod(mode), f.Close()); err != nil {
			return err
		}
		return c.PosixRename(tmp, path)
	})
}

// Get reads the file at path on the machine.
func (m *Machine) Get(ctx context.Context, path string) ([]byte, error) {
	var data []byte
	err := m.sftp(ctx, func(c *sftp.Client) error {
		f, err := c.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		data, err = io.ReadAll(f)
		return err
	})
	return data, err
}

// sftp runs use with an SFTP client on a session of its own.
func (m *Machine) sftp(ctx context.Context, use func(*sftp.Client) error) error {
	return m.session(ctx, func(s *ssh.Session) error {
		c, err := sftpOn(s)
		if err != nil {
			return fmt.Errorf("machine %s: sftp: %w", m.addr, err)
		}
		defer c.Close()
		done := make(chan error, 1)
		go func() { done <- use(c) }()
		select {
		case err = <-done:
		case <-ctx.Done():
			s.Close()
			<-done
			err = ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("machine %s: sftp: %w", m.addr, err)
		}
		return nil
	})
}

// sftpOn starts the SFTP subsystem on s and speaks it.
func sftpOn(s *ssh.Session) (*sftp.Client, error) {
	w, err := s.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := s.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.RequestSubsystem("sftp"); err != nil {
		return nil, err
	}
	return sftp.NewClientPipe(r, w)
}
