// Package locksvc is an in-process lease lock service on TCP, so whole trials (real
// worker processes, real pauses, real checkers) run without Docker. It speaks JSON lines,
// one request and one answer per line, and logs every request it serves with the
// server's CLOCK_MONOTONIC time, the outcome and the holder after it: the ground truth of
// who held the lock.
//
// A lease expires by the service's wall clock plus an adjustable offset, as Redis expires
// keys, so clock faults apply to it as they do to Redis. The correct service never grants
// a lock whose lease is still running to anyone else; with Options.Broken it does, on
// purpose, so the checkers can be seen to catch it. Either way it never lets a fencing
// token go backwards or repeat.
package locksvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads/jsonl"
)

// Request kinds.
const (
	OpAcquire = "acquire"
	OpRelease = "release"
	// OpExtend renews the owner's lease for TTLms from now.
	OpExtend = "extend"
)

// Reasons a request is refused. A refused request changed nothing.
const (
	RefuseBusy       = "busy"
	RefuseNotHeld    = "not-held"
	RefuseBadRequest = "bad-request"
)

// Request is one line a client sends.
type Request struct {
	Op    string `json:"op"`
	Key   string `json:"key"`
	Owner string `json:"owner"`
	// TTLms is the lease's length, for an acquire or an extend.
	TTLms int64 `json:"ttl_ms,omitempty"`
}

// Response is the line the service answers with.
type Response struct {
	OK bool `json:"ok"`
	// Token is the fencing token of a granted acquire.
	Token  int64  `json:"token,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// LogEntry is one line of the ground-truth log: a request, its answer and the lock after.
type LogEntry struct {
	Time int64 `json:"time"`
	Request
	Response
	// Holder is the owner whose lease runs after the request, if any.
	Holder string `json:"holder,omitempty"`
	// Expires is when the holder's lease ends, in Unix ms on the service's clock.
	Expires int64 `json:"expires_ms,omitempty"`
}

// Options choose how the service behaves.
type Options struct {
	// Broken grants every acquire, even while another owner's lease runs.
	Broken bool
}

type lease struct {
	owner   string
	expires time.Time // on the service's clock
}

// Server is the lock service. Requests are applied one at a time, in arrival order. It is
// safe for concurrent use.
type Server struct {
	opts   Options
	jl     *jsonl.Server
	log    io.Writer
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	leases map[string]lease
	tokens map[string]int64
	offset time.Duration
	// resumed is non-nil while paused, and closed by Resume.
	resumed chan struct{}
	// onWait, when set, is called as a request starts waiting for Resume: tests use it to
	// know a request reached a paused service.
	onWait func()
	logErr error
}

// Listen starts a service on addr (use "127.0.0.1:0" for any free loopback port) that
// writes its ground-truth log to log.
func Listen(addr string, opts Options, log io.Writer) (*Server, error) {
	s := &Server{opts: opts, log: log, closed: make(chan struct{}),
		leases: map[string]lease{}, tokens: map[string]int64{}}
	jl, err := jsonl.Listen(addr, s.handle)
	if err != nil {
		return nil, fmt.Errorf("lock service listen: %w", err)
	}
	s.jl = jl
	return s, nil
}

// Addr is where clients connect.
func (s *Server) Addr() string { return s.jl.Addr() }

// SetClockOffset sets how far the service's clock is from the wall clock: a jump past a
// lease's end expires it at once, as libfaketime does to Redis.
func (s *Server) SetClockOffset(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset = d
}

// Pause stops the service answering, as SIGSTOP stops a server: requests wait until
// Resume, and leases keep running out meanwhile.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resumed == nil {
		s.resumed = make(chan struct{})
	}
}

// Resume lets waiting and new requests through again.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resumed != nil {
		close(s.resumed)
		s.resumed = nil
	}
}

// Close stops the service, even while paused (waiting requests get no answer), and waits
// for its connections to end. It reports a failure to write the ground-truth log, since a
// run without it is not trustworthy.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.closed) }) // releases requests waiting for Resume
	err := s.jl.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.logErr)
}

func (s *Server) handle(line []byte) (any, bool) {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		req = Request{} // decided as a bad request, and logged like any other
	}
	return s.apply(req)
}

// lockRunning takes s.mu once the service is not paused. It reports false, without the
// lock, when the service closes first.
func (s *Server) lockRunning() bool {
	s.mu.Lock()
	for s.resumed != nil {
		resumed, onWait := s.resumed, s.onWait
		s.mu.Unlock()
		if onWait != nil {
			onWait()
		}
		select {
		case <-resumed:
		case <-s.closed:
			return false
		}
		s.mu.Lock()
	}
	return true
}

// apply decides a request and logs it under the same lock, so the log's order is the
// order in which the lock changed hands. It reports false when the service closed first.
func (s *Server) apply(req Request) (Response, bool) {
	if !s.lockRunning() {
		return Response{}, false
	}
	defer s.mu.Unlock()
	now := time.Now().Round(0).Add(s.offset) // Round(0): compare wall clocks, as Redis does
	if l, held := s.leases[req.Key]; held && !now.Before(l.expires) {
		delete(s.leases, req.Key)
	}
	resp := s.decide(req, now)
	entry := LogEntry{Time: history.Now(), Request: req, Response: resp}
	if l, held := s.leases[req.Key]; held {
		entry.Holder, entry.Expires = l.owner, l.expires.UnixMilli()
	}
	if line, err := json.Marshal(entry); err == nil && s.logErr == nil {
		_, s.logErr = s.log.Write(append(line, '\n'))
	}
	return resp, true
}

// decide applies req to leases that have not expired at now.
func (s *Server) decide(req Request, now time.Time) Response {
	if req.Key == "" || req.Owner == "" {
		return Response{Reason: RefuseBadRequest}
	}
	l, held := s.leases[req.Key]
	switch req.Op {
	case OpAcquire:
		if req.TTLms <= 0 {
			return Response{Reason: RefuseBadRequest}
		}
		if held && !s.opts.Broken {
			return Response{Reason: RefuseBusy}
		}
		s.tokens[req.Key]++
		s.leases[req.Key] = lease{owner: req.Owner, expires: now.Add(time.Duration(req.TTLms) * time.Millisecond)}
		return Response{OK: true, Token: s.tokens[req.Key]}
	case OpRelease:
		if !held || l.owner != req.Owner {
			return Response{Reason: RefuseNotHeld}
		}
		delete(s.leases, req.Key)
		return Response{OK: true}
	case OpExtend:
		switch {
		case req.TTLms <= 0:
			return Response{Reason: RefuseBadRequest}
		case !held || l.owner != req.Owner:
			return Response{Reason: RefuseNotHeld}
		}
		l.expires = now.Add(time.Duration(req.TTLms) * time.Millisecond)
		s.leases[req.Key] = l
		return Response{OK: true}
	}
	return Response{Reason: RefuseBadRequest}
}

// Client is a connection to the service that dials again after a failure, as Redis and
// ZooKeeper clients do. It is not safe for concurrent use.
type Client struct {
	addr string
	conn *jsonl.Conn
}

// NewClient makes a client of the service at addr. It dials on the first request.
func NewClient(addr string) *Client { return &Client{addr: addr} }

// Do sends one request and waits for the answer until ctx's deadline. A refusal is a
// Response with OK false; an error leaves the outcome unknown (the request may have been
// applied), and the connection is dropped because a late answer would be read as the
// next request's.
func (c *Client) Do(ctx context.Context, req Request) (Response, error) {
	var resp Response
	err := c.roundTrip(ctx, req, &resp)
	if err != nil {
		c.conn = nil // RoundTrip closed it
		return Response{}, fmt.Errorf("lock service %s %s %s: %w", c.addr, req.Op, req.Key, err)
	}
	return resp, nil
}

func (c *Client) roundTrip(ctx context.Context, req Request, resp *Response) error {
	if c.conn == nil {
		conn, err := jsonl.Dial(ctx, c.addr)
		if err != nil {
			return err
		}
		c.conn = conn
	}
	return c.conn.RoundTrip(ctx, req, resp)
}

// Close closes the connection, if there is one.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}
