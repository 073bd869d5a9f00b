// Package storage is the shared storage that lock holders write to: a network service
// holding one counter register per lock key, and the ground truth of the run. Every request
// it serves is logged with the server's CLOCK_MONOTONIC time and whether it was accepted,
// and that time is in the answer too, so a client can record when its request took effect.
//
// With fencing on it applies Kleppmann's rule: it remembers the highest token seen on any
// request (read or write) for a key and rejects every request carrying a lower one, so a
// paused ex-holder cannot overwrite the work of the holder that replaced it. With fencing
// off it accepts everything, like most storage does.
package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads/jsonl"
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
	Accepted bool  `json:"accepted"`
	Value    int64 `json:"value"`
	// Reason is why a request was rejected, in the history's words: stale-token,
	// missing-token or bad-request.
	Reason history.ErrorKind `json:"reason,omitempty"`
	// Applied is when the server applied or refused the request: CLOCK_MONOTONIC
	// nanoseconds, read under the lock that orders requests (the log's time).
	Applied int64 `json:"applied,omitempty"`
}

// LogEntry is one line of the ground-truth log.
type LogEntry struct {
	Time     int64             `json:"time"`
	Client   int               `json:"client"`
	Op       string            `json:"op"`
	Key      string            `json:"key"`
	Written  *int64            `json:"written,omitempty"`
	Token    *int64            `json:"token,omitempty"`
	Accepted bool              `json:"accepted"`
	Reason   history.ErrorKind `json:"reason,omitempty"`
	// Value is the register after the request.
	Value int64 `json:"value"`
	// Highest is the highest token the server had seen for the key after this request.
	Highest *int64 `json:"highest,omitempty"`
}

// Server serves the registers. Requests are applied one at a time, in arrival order.
type Server struct {
	fencing bool
	jl      *jsonl.Server
	log     io.Writer

	mu      sync.Mutex
	values  map[string]int64
	highest map[string]int64
	logErr  error
}

// Listen starts a server on addr (use "127.0.0.1:0" for any free loopback port) that
// writes its ground-truth log to log.
func Listen(addr string, fencing bool, log io.Writer) (*Server, error) {
	s := &Server{fencing: fencing, log: log, values: map[string]int64{}, highest: map[string]int64{}}
	jl, err := jsonl.Listen(addr, s.handle)
	if err != nil {
		return nil, fmt.Errorf("storage listen: %w", err)
	}
	s.jl = jl
	return s, nil
}

// Addr is where clients connect.
func (s *Server) Addr() string { return s.jl.Addr() }

// Close stops the server and waits for its connections to end. It reports a failure to
// write the ground-truth log, since a run without it is not trustworthy.
func (s *Server) Close() error {
	err := s.jl.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.logErr)
}

func (s *Server) handle(line []byte) (any, bool) {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Response{Reason: history.ErrBadRequest}, true
	}
	return s.apply(req), true
}

// apply decides a request and logs it under the same lock, so the log's order is the
// order in which the register changed.
func (s *Server) apply(req Request) Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := s.decide(req)
	resp.Applied = history.Now()
	entry := LogEntry{Time: resp.Applied, Client: req.Client, Op: req.Op, Key: req.Key, Token: req.Token,
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
		return Response{Reason: history.ErrBadRequest}
	}
	if s.fencing {
		if req.Token == nil {
			return Response{Reason: history.ErrMissingToken}
		}
		if h, seen := s.highest[req.Key]; seen && *req.Token < h {
			return Response{Reason: history.ErrStaleToken, Value: s.values[req.Key]}
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
	conn *jsonl.Conn
	id   int
}

// Dial connects client number id to the server at addr.
func Dial(ctx context.Context, addr string, id int) (*Client, error) {
	c, err := jsonl.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("dial storage %s: %w", addr, err)
	}
	return &Client{conn: c, id: id}, nil
}

// RejectedError is a request the server refused, or could not be sent: it definitely did
// not take effect.
type RejectedError struct {
	Reason history.ErrorKind
	// Message says more, when there is more to say.
	Message string
}

func (e *RejectedError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("storage rejected the request: %s: %s", e.Reason, e.Message)
	}
	return "storage rejected the request: " + string(e.Reason)
}

// Do sends one request and returns the register's value after it; see Send.
func (c *Client) Do(ctx context.Context, req Request) (int64, error) {
	resp, err := c.Send(ctx, req)
	return resp.Value, err
}

// Send sends one request and waits for the answer until ctx's deadline. A rejection is a
// *RejectedError, returned with the server's answer (its Applied says when it refused);
// any other error leaves the outcome unknown (the request may have been applied), and the
// connection is closed because a late answer would desynchronise it.
func (c *Client) Send(ctx context.Context, req Request) (Response, error) {
	req.Client = c.id
	var resp Response
	if err := c.conn.RoundTrip(ctx, req, &resp); err != nil {
		return Response{}, fmt.Errorf("storage %s: %w", req.Op, err)
	}
	if !resp.Accepted {
		return resp, &RejectedError{Reason: resp.Reason}
	}
	return resp, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
