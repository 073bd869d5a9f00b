package lazydisk

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Request is one control request to a serving daemon: one JSON line on its socket.
type Request struct {
	Op    string        `json:"op"`              // "drop", "sync", "hold", "release", "slow", "counters" or "stop"
	Delay time.Duration `json:"delay,omitempty"` // slow: the sync delay; 0 heals
}

// Reply answers a Request: one JSON line.
type Reply struct {
	Lost  *Lost  `json:"lost,omitempty"`  // drop
	Stats *Stats `json:"stats,omitempty"` // counters
	Error string `json:"error,omitempty"`
}

// Ask sends req to the daemon serving on the unix socket and returns its reply.
func Ask(ctx context.Context, socket string, req Request) (Reply, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", socket)
	if err != nil {
		return Reply{}, fmt.Errorf("reach the lazy disk at %s: %w", socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Reply{}, fmt.Errorf("ask the lazy disk at %s: %w", socket, err)
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return Reply{}, fmt.Errorf("ask the lazy disk at %s: %w", socket, err)
	}
	var rep Reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return Reply{}, fmt.Errorf("the lazy disk at %s answered %q: %w", socket, line, err)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("the lazy disk at %s: %s", socket, rep.Error)
	}
	return rep, nil
}

// Exit codes of Main.
const (
	exitOK      = 0
	exitUsage   = 254 // bad arguments
	exitFailure = 255 // cannot mount, cannot reach the daemon...
)

// askTimeout bounds a command's request; a drop of a large pending state takes longest.
const askTimeout = 2 * time.Minute

// Main runs a disk command from args (the lockbreaker binary's hidden `lockbreaker disk
// ...`) and returns its exit code:
//
//	serve --backing B --mount M --socket S [--pidfile P] [--detach --log L] [--debug]
//	drop --socket S              prints the Lost as one JSON line
//	sync --socket S              makes every pending change durable
//	hold --socket S              makes every open of a file wait, until release
//	release --socket S           lets the held opens go on
//	slow --socket S --delay D    D a Go duration, 0 to heal
//	counters --socket S          prints the Stats as one JSON line
//	stop --socket S              returns once the disk is unmounted
//	clean --socket S --pidfile P --mount M   stops the daemon, or kills a dead one's
//	                             leftovers, and unmounts: whatever a killed run left
//
// serve mounts, writes the pidfile once serving, and answers requests on the socket
// until stop, SIGTERM or SIGINT; then it wakes waiting syncs, unmounts (lazily if the
// mount is busy), removes the socket and the pidfile, and exits 0. With --detach it
// starts itself again in a session of its own, its output appended to L, and returns
// once that one serves. Errors are one line on stderr, with 254 for bad arguments and
// 255 for failures.
func Main(args []string, stdout, stderr io.Writer) int {
	fail := func(code int, cmd string, err error) int {
		fmt.Fprintf(stderr, "disk %s: %s\n", cmd, strings.Join(strings.Fields(err.Error()), " "))
		return code
	}
	if len(args) == 0 {
		return fail(exitUsage, "", errors.New("want a command: serve, drop, sync, hold, release, slow, counters, stop or clean"))
	}
	cmd := args[0]
	flags := flag.NewFlagSet(cmd, flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	socket := flags.String("socket", "", "the daemon's control socket")
	var backing, mount, pidfile, delay, log *string
	var debug, detach *bool
	switch cmd {
	case "serve":
		backing = flags.String("backing", "", "the directory that holds the durable state")
		mount = flags.String("mount", "", "the directory to serve it on")
		pidfile = flags.String("pidfile", "", "where to write the daemon's pid once it serves")
		debug = flags.Bool("debug", false, "log every FUSE request")
		detach = flags.Bool("detach", false, "serve in a session of its own, and return once it serves")
		log = flags.String("log", "", "with --detach, the file the daemon's output is appended to")
	case "slow":
		delay = flags.String("delay", "", "how long every sync waits, a Go duration; 0 heals")
	case "clean":
		pidfile = flags.String("pidfile", "", "the daemon's pidfile")
		mount = flags.String("mount", "", "the disk's mount")
	case "drop", "sync", "hold", "release", "counters", "stop":
	default:
		return fail(exitUsage, cmd, errors.New("unknown command; want serve, drop, sync, hold, release, slow, counters, stop or clean"))
	}
	if err := flags.Parse(args[1:]); err != nil {
		return fail(exitUsage, cmd, err)
	}
	if flags.NArg() > 0 {
		return fail(exitUsage, cmd, fmt.Errorf("unexpected argument %q", flags.Arg(0)))
	}
	if *socket == "" {
		return fail(exitUsage, cmd, errors.New("--socket is missing"))
	}
	req := Request{Op: cmd}
	switch cmd {
	case "serve":
		for _, dir := range []struct{ flag, path string }{{"--backing", *backing}, {"--mount", *mount}} {
			if dir.path == "" {
				return fail(exitUsage, cmd, fmt.Errorf("%s is missing", dir.flag))
			}
			// A dead mount cannot be stat'ed (ENOTCONN): Mount says what it is.
			fi, err := os.Stat(dir.path)
			if errors.Is(err, os.ErrNotExist) || err == nil && !fi.IsDir() {
				return fail(exitUsage, cmd, fmt.Errorf("%s %s is not a directory", dir.flag, dir.path))
			}
		}
		if *detach {
			if *log == "" {
				return fail(exitUsage, cmd, errors.New("--detach needs --log"))
			}
			if err := serveDetached(args[1:], *socket, *log); err != nil {
				return fail(exitFailure, cmd, err)
			}
			return exitOK
		}
		if err := serve(Options{Backing: *backing, Mount: *mount, Debug: *debug}, *socket, *pidfile); err != nil {
			return fail(exitFailure, cmd, err)
		}
		return exitOK
	case "clean":
		if *pidfile == "" || *mount == "" {
			return fail(exitUsage, cmd, errors.New("--pidfile and --mount are needed"))
		}
		if err := Clean(*socket, *pidfile, *mount); err != nil {
			return fail(exitFailure, cmd, err)
		}
		return exitOK
	case "slow":
		d, err := time.ParseDuration(*delay)
		if err != nil || d < 0 {
			return fail(exitUsage, cmd, fmt.Errorf("--delay %q is not a duration of 0 or more, like 500ms", *delay))
		}
		req.Delay = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
	defer cancel()
	rep, err := Ask(ctx, *socket, req)
	if err != nil {
		return fail(exitFailure, cmd, err)
	}
	var out any
	switch {
	case rep.Lost != nil:
		out = rep.Lost
	case rep.Stats != nil:
		out = rep.Stats
	default:
		return exitOK
	}
	if err := json.NewEncoder(stdout).Encode(out); err != nil {
		return fail(exitFailure, cmd, err)
	}
	return exitOK
}

// serve mounts a lazy disk and answers requests on socket until stop or a signal.
func serve(opts Options, socket, pidfile string) error {
	d, err := Mount(opts)
	if err != nil {
		return err
	}
	ln, err := listen(socket)
	if err != nil {
		return errors.Join(err, d.Unmount())
	}
	defer os.Remove(socket)
	if pidfile != "" {
		if err := os.WriteFile(pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			ln.Close()
			return errors.Join(err, d.Unmount())
		}
		defer os.Remove(pidfile)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	s := &server{disk: d, stop: make(chan struct{}), stopped: make(chan struct{})}
	go s.accept(ln)
	select {
	case <-signals:
	case <-s.stop:
	}
	s.unmountErr = d.Unmount()
	close(s.stopped)
	ln.Close()
	// The answers in flight, stop's among them, are written before the process may exit.
	s.answering.Wait()
	return s.unmountErr
}

// A server answers a daemon's control requests.
type server struct {
	disk       *FS
	stopOnce   sync.Once
	stop       chan struct{} // closed by the stop request
	stopped    chan struct{} // closed once unmounted, with unmountErr set
	unmountErr error
	answering  sync.WaitGroup
}

func (s *server) accept(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		s.answering.Go(func() { s.answer(conn) })
	}
}

// requestTimeout bounds how long a client takes to send its request.
const requestTimeout = 10 * time.Second

// answer serves one request on conn. stop is answered once the disk is unmounted.
func (s *server) answer(conn net.Conn) {
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return
	}
	var req Request
	var rep Reply
	if err := json.Unmarshal(line, &req); err != nil {
		rep.Error = "bad request: " + err.Error()
	}
	switch req.Op {
	case "drop":
		lost := s.disk.Drop()
		rep.Lost = &lost
	case "slow":
		if req.Delay < 0 {
			rep.Error = "negative delay"
			break
		}
		s.disk.SetSyncDelay(req.Delay)
	case "sync":
		s.disk.Sync()
	case "hold":
		s.disk.HoldOpens()
	case "release":
		s.disk.ReleaseOpens()
	case "counters":
		stats := s.disk.Stats()
		rep.Stats = &stats
	case "stop":
		s.stopOnce.Do(func() { close(s.stop) })
		<-s.stopped
		if s.unmountErr != nil {
			rep.Error = s.unmountErr.Error()
		}
	default:
		if rep.Error == "" {
			rep.Error = fmt.Sprintf("unknown op %q", req.Op)
		}
	}
	json.NewEncoder(conn).Encode(rep)
}

// listen listens on the unix socket at path, taking the place of a socket a killed
// daemon left there, but not of one a daemon answers on.
func listen(path string) (net.Listener, error) {
	if conn, err := net.Dial("unix", path); err == nil {
		conn.Close()
		return nil, fmt.Errorf("a daemon answers on %s already", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}
