// Package storage is the shared storage that lock holders write to: a network service
// holding one counter register per lock key, and the ground truth of the run. Every request
// it serves is logged with the server's CLOCK_MONOTONIC time and whether it was accepted.
//
// With fencing on it applies Kleppmann's rule: it remembers the highest token seen on any
// request (read or write) for a key and rejects every request carrying a lower one, so a
// paused ex-holder cannot overwrite the work of the holder that replaced it. With fencing
// off it accepts everything, like most storage does.
package storage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/lockbreaker/lockbreaker/history"
)

// Request kinds. Inspect is the harness's final look at the register: it is not fenced
// because the harness holds no lock and changes nothing.
const (
	OpRead    = "read"
	OpWrite   = "write"
	OpInspect = "inspect"
)

// Request is one line a client sends.
type Request struct {
	Op     string `json:"op"`
	Key    string `json:"key"`
	Value  int64  `json:"value,omitempty"`
	Token  *int64 `json:"token,omitempty"`
	Client int    `json:"client"`
}

// Response is the line the server answers with.
type Response struct {
	Accepted bool   `json:"accepted"`
	Value    int64  `json:"value"`
	Reason   string `json:"reason,omitempty"`
}

// Reasons a request is rejected.
const (
	RejectStale        = history.ErrStaleToken
	RejectMissingToken = "missing-token"
	RejectBadRequest   = "bad-request"
)

// LogEntry is one line of the ground-truth log.
type LogEntry struct {
	Time     int64  `json:"time"`
	Client   int    `json:"client"`
	Op       string `json:"op"`
	Key      string `json:"key"`
	Written  *int64 `json:"written,omitempty"`
	Token    *int64 `json:"token,omitempty"`
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	// Value is the register after the request.
	Value int64 `json:"value"`
	// Highest is the highest token the server had seen for the key after this request.
	Highest *int64 `json:"highest,omitempty"`
}

// Server serves the registers. Requests are applied one at a time, in arrival order.
type Server struct {
	fencing bool
	ln      net.Listener
	log     io.Writer

	mu      sync.Mutex
	values  map[string]int64
	highest map[string]int64
	logErr  error

	wg    sync.WaitGroup
	conns sync.Map
}

// Listen starts a server on addr (use "127.0.0.1:0" for any free loopback port) that
// writes its ground-truth log to log.
func Listen(addr string, fencing bool, log io.Writer) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("storage listen: %w", err)
	}
	s := &Server{fencing: fencing, ln: ln, log: log, values: map[string]int64{}, highest: map[string]int64{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is where clients connect.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server and waits for its connections to end. It reports a failure to
// write the ground-truth log, since a run without it is not trustworthy.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return errors.Join(err, s.logErr)
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Store(c, nil)
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer s.conns.Delete(c)
	defer c.Close()
	in := bufio.NewScanner(c)
	enc := json.NewEncoder(c)
	for in.Scan() {
		var req Request
		var resp Response
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			resp = Response{Reason: RejectBadRequest}
		} else {
			resp = s.apply(req)
		}
		if enc.Encode(resp) != nil {
			return
		}
	}
}

// apply decides a request and logs it under the same lock, so the log's order is the
// order in which the register changed.
func (s *Server) apply(req Request) Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := s.decide(req)
	entry := LogEntry{Time: history.Now(), Client: req.Client, Op: req.Op, Key: req.Key, Token: req.Token,
		Accepted: resp.Accepted, Reason: resp.Reason, Value: s.values[req.Key]}
	if req.Op == OpWrite {
		entry.Written = &req.Value
	}
	if h, ok := s.highest[req.Key]; ok {
		entry.Highest = &h
	}
	if line, err := json.Marshal(entry); err == nil && s.logErr == nil {
		_, s.logErr = s.log.Write(append(line, '\n'))
	}
	return resp
}

func (s *Server) decide(req Request) Response {
	switch req.Op {
	case OpInspect:
		return Response{Accepted: true, Value: s.values[req.Key]}
	case OpRead, OpWrite:
	default:
		return Response{Reason: RejectBadRequest}
	}
	if s.fencing {
		if req.Token == nil {
			return Response{Reason: RejectMissingToken}
		}
		if h, seen := s.highest[req.Key]; seen && *req.Token < h {
			return Response{Reason: RejectStale, Value: s.values[req.Key]}
		}
		s.highest[req.Key] = *req.Token
	}
	if req.Op == OpWrite {
		s.values[req.Key] = req.Value
	}
	return Response{Accepted: true, Value: s.values[req.Key]}
}

// Client is one connection to the storage. It is not safe for concurrent use: each lock
// client has its own.
type Client struct {
	conn net.Conn
	in   *bufio.Scanner
	id   int
}

// Dial connects client number id to the server at addr.
func Dial(ctx context.Context, addr string, id int) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial storage %s: %w", addr, err)
	}
	return &Client{conn: c, in: bufio.NewScanner(c), id: id}, nil
}

// RejectedError is a request the server refused: it definitely did not take effect.
type RejectedError struct{ Reason string }

func (e *RejectedError) Error() string { return "storage rejected the request: " + e.Reason }

// Do sends one request and waits for the answer until ctx's deadline. A rejection is a
// *RejectedError; any other error leaves the outcome unknown (the request may have been
// applied), and the connection is closed because a late answer would desynchronise it.
func (c *Client) Do(ctx context.Context, req Request) (int64, error) {
	req.Client = c.id
	deadline, _ := ctx.Deadline() // none: the zero time clears an earlier call's deadline
	c.conn.SetDeadline(deadline)
	line, _ := json.Marshal(req)
	if _, err := c.conn.Write(append(line, '\n')); err != nil {
		c.conn.Close()
		return 0, fmt.Errorf("storage %s: %w", req.Op, err)
	}
	if !c.in.Scan() {
		c.conn.Close()
		err := c.in.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return 0, fmt.Errorf("storage %s: %w", req.Op, err)
	}
	var resp Response
	if err := json.Unmarshal(c.in.Bytes(), &resp); err != nil {
		c.conn.Close()
		return 0, fmt.Errorf("storage %s: bad answer: %w", req.Op, err)
	}
	if !resp.Accepted {
		return resp.Value, &RejectedError{Reason: resp.Reason}
	}
	return resp.Value, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
