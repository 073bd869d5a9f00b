package execlock

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// The programs these tests drive are this test binary again, started with programEnv
// naming how it behaves: well (serving memLock), or each way a program can break the
// protocol.
const programEnv = "EXECLOCK_TEST_PROGRAM"

func TestMain(m *testing.M) {
	MaybeServe() // BenchmarkExecRoundTrip's program
	if behaviour := os.Getenv(programEnv); behaviour != "" {
		runProgram(behaviour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runProgram behaves as behaviour says, on stdin and stdout.
func runProgram(behaviour string) {
	in := bufio.NewScanner(os.Stdin)
	say := func(line string) { fmt.Println(line) }
	// readConfig reads the configuration line and says ready.
	ready := func() {
		in.Scan()
		say(`{"result":"ready"}`)
	}
	request := func() { in.Scan() }
	switch behaviour {
	case "well":
		if err := Serve(os.Stdin, os.Stdout, func(workloads.Config) (workloads.Lock, error) { return &memLock{}, nil }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "cannot-extend": // a Go lock without Extend, told that holders will extend
		err := Serve(os.Stdin, os.Stdout, func(workloads.Config) (workloads.Lock, error) { return struct{ workloads.Lock }{&memLock{}}, nil })
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "exits-at-once":
		fmt.Fprintln(os.Stderr, "Traceback: ImportError: no module named redis")
		os.Exit(3)
	case "banner":
		say("mylock 1.0 starting")
		ready()
	case "session-lease":
		in.Scan()
		say(`{"result":"ready","lease":"session"}`)
		request()
		say(`{"result":"granted","detail":{"node":"n1"}}`)
	case "odd-lease":
		in.Scan()
		say(`{"result":"ready","lease":"forever"}`)
	case "refuses":
		in.Scan()
		say(`{"result":"refused","message":"this lock has no fencing token"}`)
	case "never-ready":
		in.Scan()
		select {}
	case "garbage":
		ready()
		request()
		say("this is not json")
	case "oversize":
		ready()
		request()
		say(`{"result":"granted","message":"` + strings.Repeat("a", MaxLine) + `"}`)
	case "unknown-answer":
		ready()
		request()
		say(`{"result":"maybe"}`)
	case "unknown-key":
		ready()
		request()
		say(`{"result":"granted","tokn":3}`)
	case "no-token":
		ready()
		request()
		say(`{"result":"granted"}`)
	case "two-answers":
		ready()
		request()
		say(`{"result":"busy"}`)
		say(`{"result":"busy"}`)
		request()
		select {}
	case "hangs":
		ready()
		request()
		select {}
	case "never-reads":
		fmt.Fprintln(os.Stderr, "compiling...")
		select {}
	case "spawns-and-exits-at-once":
		// A launcher that started a child of its own (a compiler, a runtime) and ended.
		exec.Command("sleep", "30").Start()
		fmt.Fprintln(os.Stderr, "mylock: no java on PATH: install openjdk-17-jdk-headless")
		os.Exit(1)
	case "exits-in-acquire":
		ready()
		request()
		fmt.Fprintln(os.Stderr, "redis.exceptions.ConnectionError: killed")
		os.Exit(1)
	}
}

// memLock is a lock in memory: the well-behaved program's lock.
type memLock struct {
	held  bool
	token int64
}

func (l *memLock) Acquire(context.Context) (workloads.Grant, error) {
	if l.held {
		return workloads.Grant{}, workloads.ErrBusy
	}
	l.held, l.token = true, l.token+1
	return workloads.Grant{Token: l.token, HasToken: true, Detail: map[string]string{"node": "n1"}}, nil
}

func (l *memLock) Release(context.Context) error {
	if !l.held {
		return workloads.ErrNotHeld
	}
	l.held = false
	return nil
}

func (l *memLock) Extend(context.Context) error {
	if !l.held {
		return workloads.ErrNotHeld
	}
	return nil
}

func (l *memLock) Close() error { return nil }

// testOptions are bounds no program that answers comes near, however busy the machine (a
// test binary started beside make test took over a second to answer its configuration);
// a test of a program that never answers shortens the bound it waits out.
func testOptions(log io.Writer) Options {
	return Options{Ready: time.Minute, Grace: time.Minute, Stop: 300 * time.Millisecond, Log: log}
}

// patient is as long as a request of a test may take: as long as testOptions allow.
const patient = time.Minute

func config(behaviour string, fencing bool) workloads.Config {
	exe, _ := os.Executable()
	return workloads.Config{System: "redis", Nodes: []string{"10.0.0.2:6379"}, Key: "lock", TTL: 2 * time.Second,
		Fencing: fencing, OpTimeout: 200 * time.Millisecond, Retry: 20 * time.Millisecond, Owner: "w0",
		Program: []string{"env", programEnv + "=" + behaviour, exe}}
}

// A well-behaved program: grants with their token and detail, extends, a definite busy
// and not-held, and a clean exit when its stdin closes.
func TestWellBehavedProgram(t *testing.T) {
	opts := testOptions(testLog{t})
	opts.Stop = patient // a race-detecting binary sleeps a second on its way out
	cfg := config("well", true)
	cfg.Extend = true
	l, err := Start(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patient)
	defer cancel()
	g, err := l.Acquire(ctx)
	if err != nil || !g.HasToken || g.Token != 1 || g.Detail["node"] != "n1" {
		t.Errorf("acquire: %+v, %v; want token 1 and detail node n1", g, err)
	}
	if _, err := l.Acquire(ctx); !errors.Is(err, workloads.ErrBusy) {
		t.Errorf("second acquire: %v, want busy", err)
	}
	if err := l.Extend(ctx); err != nil {
		t.Errorf("extend: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("release: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, workloads.ErrNotHeld) {
		t.Errorf("second release: %v, want not held", err)
	}
	if err := l.Extend(ctx); !errors.Is(err, workloads.ErrNotHeld) {
		t.Errorf("extend once released: %v, want not held", err)
	}
	l.Close()
	<-l.exited
	if l.status != nil {
		t.Errorf("the program exited with %v, want exit 0 when its stdin closed", l.status)
	}
}

// Every way a program can break the protocol gives a clear error, at once or within its
// bound, never a hang; the program is gone afterwards, and every later call returns the
// same error.
func TestProtocolAbuse(t *testing.T) {
	cases := []struct {
		behaviour string
		fencing   bool
		extend    bool  // holders will extend
		atStart   bool  // the error comes from Start
		want      error // ErrBroken: the run stops; ErrLost: the op is indeterminate
		says      string
	}{
		{behaviour: "exits-at-once", atStart: true, want: workloads.ErrLost, says: "(exit status 3); its stderr ended: Traceback: ImportError"},
		{behaviour: "banner", atStart: true, want: workloads.ErrBroken, says: `line "mylock 1.0 starting" is not the protocol's JSON`},
		{behaviour: "odd-lease", atStart: true, want: workloads.ErrBroken, says: `answered its configuration with lease "forever"; want "key", "session" or none`},
		{behaviour: "refuses", fencing: true, atStart: true, want: workloads.ErrBroken, says: "refused its configuration: this lock has no fencing token"},
		{behaviour: "cannot-extend", extend: true, atStart: true, want: workloads.ErrBroken, says: "refused its configuration: this lock cannot extend a lease"},
		{behaviour: "never-ready", atStart: true, want: workloads.ErrLost, says: "did not answer within 200ms (does it flush stdout after every line?)"},
		{behaviour: "garbage", want: workloads.ErrBroken, says: `answering acquire: line "this is not json" is not the protocol's JSON`},
		{behaviour: "oversize", want: workloads.ErrBroken, says: "wrote a line longer than 65536 bytes"},
		{behaviour: "unknown-answer", want: workloads.ErrBroken, says: `answered acquire with "maybe"; want "granted", "busy" or "unknown"`},
		{behaviour: "unknown-key", want: workloads.ErrBroken, says: `unknown field "tokn"`},
		{behaviour: "no-token", fencing: true, want: workloads.ErrBroken, says: "granted the lock with no fencing token, and fencing is on"},
		{behaviour: "two-answers", want: workloads.ErrBroken, says: `wrote a line nobody asked for: "{\"result\":\"busy\"}"`},
		{behaviour: "hangs", want: workloads.ErrLost, says: "during acquire: it did not answer within"},
		{behaviour: "exits-in-acquire", want: workloads.ErrLost, says: "(exit status 1); its stderr ended: redis.exceptions.ConnectionError: killed"},
	}
	for _, c := range cases {
		t.Run(c.behaviour, func(t *testing.T) {
			t.Parallel() // a program each
			started := time.Now()
			opts, request := testOptions(testLog{t}), patient
			switch c.behaviour { // it never answers: the bound passes whatever the machine's speed
			case "never-ready":
				opts.Ready = 200 * time.Millisecond
			case "hangs":
				opts.Grace, request = 300*time.Millisecond, 200*time.Millisecond
			}
			cfg := config(c.behaviour, c.fencing)
			cfg.Extend = c.extend
			l, err := Start(cfg, opts)
			if !c.atStart {
				if err != nil {
					t.Fatalf("start: %v", err)
				}
				defer l.Close()
				ctx, cancel := context.WithTimeout(context.Background(), request)
				defer cancel()
				_, err = l.Acquire(ctx)
				if c.behaviour == "two-answers" { // the first answer was fine
					if !errors.Is(err, workloads.ErrBusy) {
						t.Fatalf("first acquire: %v, want busy", err)
					}
					// The stray line must be there before the next request: sent after it,
					// it would be that request's answer, as far as anyone can tell.
					for deadline := time.Now().Add(10 * time.Second); len(l.lines) == 0; time.Sleep(time.Millisecond) {
						if time.Now().After(deadline) {
							t.Fatal("the stray line never arrived")
						}
					}
					_, err = l.Acquire(ctx)
				}
				if again := l.Release(ctx); again != err {
					t.Errorf("the call after the error returned %v, want the same error", again)
				}
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %v;\nwant %v saying %q", err, c.want, c.says)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is more than one line: %q", err)
			}
			if l != nil {
				select {
				case <-l.exited:
				case <-time.After(patient):
					t.Errorf("the program still runs")
				}
			}
			t.Logf("%v (%s)", err, time.Since(started).Round(time.Millisecond))
		})
	}
}

// A program that says what keeps its grants alive has every grant say it, beside its own
// detail: lease-safety judges its grants by it.
func TestReadySaysWhatKeepsAGrant(t *testing.T) {
	l, err := Start(config("session-lease", false), testOptions(testLog{t}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"node": "n1", history.KeptDetail: string(history.KeptBySession)}; !maps.Equal(g.Detail, want) {
		t.Errorf("grant detail %v, want %v", g.Detail, want)
	}
}

// The program's stderr reaches the log line by line, marked as the program's, all of it
// by the time Start has given up on the program.
func TestProgramStderrGoesToTheLog(t *testing.T) {
	var log bytes.Buffer
	_, err := Start(config("exits-at-once", false), testOptions(&log))
	if !errors.Is(err, workloads.ErrLost) {
		t.Fatalf("start: %v", err)
	}
	if got := log.String(); got != "program: Traceback: ImportError: no module named redis\n" {
		t.Errorf("log %q", got)
	}
}

// A program that cannot be started at all breaks the client at once.
func TestMissingProgram(t *testing.T) {
	cfg := config("well", false)
	cfg.Program = []string{"/nonexistent/mylock"}
	_, err := Start(cfg, testOptions(testLog{t}))
	if !errors.Is(err, workloads.ErrBroken) || !strings.Contains(err.Error(), "start program") {
		t.Errorf("start: %v, want it broken", err)
	}
}

// The configuration line holds every key, durations in seconds, the Sentinels' name for
// the primary only with Sentinels.
func TestConfigurationLine(t *testing.T) {
	cfg := config("well", true)
	var b bytes.Buffer
	if err := encode(&b, configOf(cfg)); err != nil {
		t.Fatal(err)
	}
	want := `{"system":"redis","nodes":["10.0.0.2:6379"],"sentinels":[],"sentinel_master":"","key":"lock","ttl":2,` +
		`"fencing":true,"request_timeout":0.2,"retry":0.02,"owner":"w0","extend":false}` + "\n"
	if b.String() != want {
		t.Errorf("configuration line\n%s\nwant\n%s", b.String(), want)
	}
	cfg.Sentinels = []string{"10.0.0.5:26379"}
	if c := configOf(cfg); c.SentinelMaster == "" {
		t.Errorf("with Sentinels, no sentinel_master: %+v", c)
	}
	back := configOf(cfg).lockConfig()
	if back.TTL != cfg.TTL || back.OpTimeout != cfg.OpTimeout || back.Retry != cfg.Retry || back.Key != cfg.Key {
		t.Errorf("read back as %+v", back)
	}
}

// testLog writes a program's stderr into the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
