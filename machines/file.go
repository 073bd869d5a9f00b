// Package machines reaches the machines a run's nodes live on when they are not
// containers: hosts or VMs a team names in a file, over SSH (golang.org/x/crypto/ssh,
// host keys checked against a known_hosts file) and SFTP (github.com/pkg/sftp). Each
// machine has one connection, with a bound on the sessions open on it at once, as
// OpenSSH's MaxSessions bounds them. Nothing is installed on a machine for this: commands
// run in its own shell, files move through its sshd's SFTP server.
package machines

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/internal/sshkey"
)

// Address is one machine: user@host:port, the user and the port optional.
type Address struct {
	User string // "": the login's
	Host string
	Port int // 0: 22
}

// String is the address as a machines file writes it.
func (a Address) String() string {
	s := a.Host
	if strings.Contains(s, ":") {
		s = "[" + s + "]"
	}
	if a.User != "" {
		s = a.User + "@" + s
	}
	if a.Port != 0 {
		s += ":" + strconv.Itoa(a.Port)
	}
	return s
}

// hostPort is the address to dial.
func (a Address) hostPort() string {
	return net.JoinHostPort(a.Host, strconv.Itoa(a.port()))
}

// port is the SSH port.
func (a Address) port() int {
	if a.Port == 0 {
		return 22
	}
	return a.Port
}

// ParseAddress reads host, user@host, host:port or user@host:port; an IPv6 host with a
// port is in brackets ([::1]:2222).
func ParseAddress(s string) (Address, error) {
	var a Address
	if user, rest, ok := strings.Cut(s, "@"); ok {
		if user == "" {
			return Address{}, fmt.Errorf("machine %s: an empty user before @", quote.Short(s))
		}
		a.User, s = user, rest
	}
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Address{}, fmt.Errorf("machine %s: port %s is not a number from 1 to 65535", quote.Short(s), quote.Short(port))
		}
		host, a.Port = h, n
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	if host == "" || strings.ContainsAny(host, " \t/@[]") || strings.Count(host, ":") == 1 {
		return Address{}, fmt.Errorf("machine %s: want host, user@host, host:port or user@host:port", quote.Short(s))
	}
	a.Host = host
	return a, nil
}

// ReadFile reads a machines file (Parse).
func ReadFile(path string) ([]Address, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads one machine a line; blank lines and # comments are skipped. Errors name
// the file (name) and the line. A machine named twice, or no machine, is refused.
func Parse(r io.Reader, name string) ([]Address, error) {
	var all []Address
	seen := map[string]int{}
	lines := bufio.NewScanner(r)
	for n := 1; lines.Scan(); n++ {
		line, _, _ := strings.Cut(lines.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		a, err := ParseAddress(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		key := a.hostPort()
		if first, ok := seen[key]; ok {
			return nil, fmt.Errorf("%s:%d: machine %s is named on line %d already", name, n, a, first)
		}
		seen[key] = n
		all = append(all, a)
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no machine in it (one host or user@host:port a line)", name)
	}
	return all, nil
}

// WriteKey makes a new ed25519 key pair for stand-in machines: the private key in file
// (mode 0600), which a login's KeyFile names, and the public key as an authorized_keys line.
func WriteKey(file string) (authorized string, err error) {
	signer, err := sshkey.Write(file, "lockbreaker stand-in machines")
	if err != nil {
		return "", err
	}
	return string(ssh.MarshalAuthorizedKey(signer.PublicKey())), nil
}
