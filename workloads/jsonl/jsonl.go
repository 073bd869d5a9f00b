// Package jsonl serves and calls services that speak JSON lines over TCP: a client sends
// one request per line and reads one answer per line, in order. The storage and the
// in-process lock service speak it; this package holds their plumbing so that each of
// them is only its rules.
//
// It decides nothing about what a request means, and a lost answer is the caller's to
// judge: after any error a connection is closed, since a late answer would be read as the
// next request's.
package jsonl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Handler answers one request line. It returns the answer to send, or false to hang up
// without one.
type Handler func(line []byte) (answer any, ok bool)

// Server accepts connections and serves each request line with its Handler.
type Server struct {
	ln     net.Listener
	handle Handler
	wg     sync.WaitGroup

	mu      sync.Mutex
	closing bool
	conns   map[net.Conn]bool
}

// Listen serves handle on addr (use "127.0.0.1:0" for any free loopback port).
func Listen(addr string, handle Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, handle: handle, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is where clients connect.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, closes every connection and waits until every handler has
// returned. A handler that waits for something must be released first. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		// A connection accepted as Close runs must be closed too, or its handler would
		// wait for a line forever and Close for the handler.
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	in := bufio.NewScanner(c)
	enc := json.NewEncoder(c)
	for in.Scan() {
		answer, ok := s.handle(in.Bytes())
		if !ok || enc.Encode(answer) != nil {
			return
		}
	}
}

// Conn is one client connection. It is not safe for concurrent use.
type Conn struct {
	conn net.Conn
	in   *bufio.Scanner
}

// Dial connects to addr.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Conn{conn: c, in: bufio.NewScanner(c)}, nil
}

// RoundTrip sends req and decodes the answer into answer, within ctx's deadline. After an
// error the connection is closed: the request may or may not have been served.
func (c *Conn) RoundTrip(ctx context.Context, req, answer any) error {
	err := c.roundTrip(ctx, req, answer)
	if err != nil {
		c.conn.Close()
	}
	return err
}

func (c *Conn) roundTrip(ctx context.Context, req, answer any) error {
	deadline, _ := ctx.Deadline() // none: the zero time clears an earlier call's deadline
	c.conn.SetDeadline(deadline)
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := c.conn.Write(append(line, '\n')); err != nil {
		return err
	}
	if !c.in.Scan() {
		if err := c.in.Err(); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	if err := json.Unmarshal(c.in.Bytes(), answer); err != nil {
		return fmt.Errorf("bad answer: %w", err)
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.conn.Close() }
