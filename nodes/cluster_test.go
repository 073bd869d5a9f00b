package nodes

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockbreaker/lockbreaker/system"
)

// fake is a Remote that records what it was asked, in one log shared by a cluster's nodes.
type fake struct {
	name  string
	log   *calls
	down  bool  // its server is killed
	kill  error // what Kill answers
	netOK bool  // NetRun works while down (a machine keeps its network)
	exits error // what Alive answers (an *ExitedError: its server exited)
	disk  *Disk
}

type calls struct {
	mu  sync.Mutex
	all []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, s)
}

func (f *fake) Info() Info {
	return Info{Name: f.name, Addr: f.name + ":1", IP: "10.0.0.1", Control: "10.0.0.254", KeepPort: 22, ClockFile: "/lockbreaker/faketime"}
}
func (f *fake) Run(_ context.Context, cmd ...string) (string, error) {
	f.log.add(f.name + " run " + strings.Join(cmd, " "))
	return "", nil
}
func (f *fake) NetRun(_ context.Context, script string) error {
	f.log.add(f.name + " net " + script)
	if f.down && !f.netOK {
		return errors.New("not running")
	}
	return nil
}
func (f *fake) Put(_ context.Context, path string, data []byte) error {
	f.log.add(f.name + " put " + path + " " + string(data))
	return nil
}
func (f *fake) Signal(_ context.Context, sig syscall.Signal) error {
	f.log.add(f.name + " signal " + sig.String())
	return nil
}
func (f *fake) Kill(context.Context) error {
	f.log.add(f.name + " kill")
	if f.kill == nil {
		f.down = true
	}
	return f.kill
}
func (f *fake) Start(context.Context) error {
	f.log.add(f.name + " start")
	f.down = false
	return nil
}
func (f *fake) Alive(context.Context) error               { return f.exits }
func (f *fake) Log(context.Context, io.Writer, int) error { return nil }
func (f *fake) Disk() *Disk                               { return f.disk }

func fakeCluster(fs ...*fake) (*Cluster, *calls) {
	log := &calls{}
	rs := make([]Remote, len(fs))
	for i, f := range fs {
		f.log, rs[i] = log, f
	}
	recipe := &system.Container{Ready: func(context.Context, string) error { return nil }}
	return New(Config{System: "fake", Recipe: recipe, Clocks: Faketime, Partitions: true}, rs, nil), log
}

// A killed node's cuts are removed before it starts again: on a machine they outlive its
// server, and it would not be seen serving. A node whose cuts went with it is not asked.
func TestHealRemovesCutsBeforeRestarting(t *testing.T) {
	for _, keeps := range []bool{true, false} {
		n1 := &fake{name: "n1", netOK: keeps}
		c, log := fakeCluster(n1, &fake{name: "n2"})
		ctx := context.Background()
		if err := c.DropFrom(ctx, "n1", c.Gateway()); err != nil {
			t.Fatal(err)
		}
		if err := c.Kill(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		log.all = nil
		if err := c.Heal(ctx); err != nil {
			t.Fatalf("heal (network kept: %v): %v", keeps, err)
		}
		flush := slices.IndexFunc(log.all, func(s string) bool { return strings.HasPrefix(s, "n1 net iptables -w -F") })
		start := slices.Index(log.all, "n1 start")
		if flush < 0 || start < 0 || flush > start {
			t.Errorf("network kept %v: heal asked %q; want n1's chain flushed, then n1 started", keeps, log.all)
		}
		for _, want := range []string{"n1 signal continued", "n2 signal continued", "n1 put /lockbreaker/faketime +0.000", "n2 put /lockbreaker/faketime +0.000"} {
			if !slices.Contains(log.all, want) {
				t.Errorf("heal asked %q; want %q among them", log.all, want)
			}
		}
	}
}

// A power cycle holds the disk's opens while the server goes down, drops what the disk
// held and says so, and lets the opens go; a heal makes every disk fast again.
func TestPowerCycleDropsBeforeTheServerReadsItsDiskAgain(t *testing.T) {
	n1 := &fake{name: "n1"}
	c, log := fakeCluster(n1)
	n1.disk = &Disk{Dir: "/d", Do: func(_ context.Context, args ...string) (string, error) {
		log.add("disk " + strings.Join(args, " "))
		if args[0] == "drop" {
			return `{"files":[{"path":"log","bytes":3}],"entries":["created tmp"]}`, nil
		}
		return "", nil
	}}
	ctx := context.Background()
	lost, err := c.PowerCycle(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if lost != "3 unsynced bytes of log; created tmp" {
		t.Errorf("lost %q", lost)
	}
	want := []string{"disk hold --socket /d/disk.sock", "n1 kill", "disk drop --socket /d/disk.sock", "disk release --socket /d/disk.sock"}
	if !slices.Equal(log.all, want) {
		t.Errorf("a power cycle asked %q, want %q", log.all, want)
	}
	if err := c.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(log.all, "disk slow --socket /d/disk.sock --delay 0s") {
		t.Errorf("heal asked %q; want the disk made fast", log.all)
	}
}

// A node whose place answered the kill with a refusal runs as it did; one whose place
// never answered may have been killed, and Heal starts it again.
func TestKillThatWentUnansweredIsTakenAsKilled(t *testing.T) {
	ctx := context.Background()
	refused := &fake{name: "n1", kill: errors.New("no such container")}
	c, log := fakeCluster(refused)
	if err := c.Kill(ctx, "n1"); err == nil {
		t.Fatal("a refused kill is no error")
	}
	if down := c.byDown(killed, inPlace); len(down) != 0 {
		t.Errorf("a refused kill left n1 down")
	}
	unanswered := &fake{name: "n1", kill: context.DeadlineExceeded}
	c, log = fakeCluster(unanswered)
	if err := c.Kill(ctx, "n1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("kill: %v", err)
	}
	if err := c.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(log.all, "n1 start") {
		t.Errorf("heal asked %q; want the node that may have been killed started again", log.all)
	}
}

// DropFrom makes one rule per source in the cluster's own chain, lets the node's KeepPort
// through, and refuses a source that is no IPv4 address before it changes anything.
func TestDropFromWritesTheChain(t *testing.T) {
	c, log := fakeCluster(&fake{name: "n1"})
	ctx := context.Background()
	if err := c.DropFrom(ctx, "n1", "10.0.0.2; reboot"); err == nil || len(log.all) != 0 {
		t.Fatalf("a bad source: %v, asked %q", err, log.all)
	}
	if err := c.DropFrom(ctx, "n1", c.Gateway(), "10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	script := log.all[0]
	for _, want := range []string{"-I INPUT 1 -j lockbreaker", "--dport 22 -j RETURN", "-A lockbreaker -s 10.0.0.254 -j DROP", "-A lockbreaker -s 10.0.0.2 -j DROP"} {
		if !strings.Contains(script, want) {
			t.Errorf("the cut's script lacks %q:\n%s", want, script)
		}
	}
}

// A node whose server exits when started again is gone, told within seconds rather than at
// the end of the wait: nothing heals it, Heal neither starts nor continues it, and its
// role is down.
func TestANodeThatExitsWhenStartedAgainIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, log := fakeCluster(&fake{name: "n1", exits: &ExitedError{How: "exit code 3"}}, &fake{name: "n2"})
		c.cfg.Recipe.Ready = func(_ context.Context, addr string) error {
			if addr == "n1:1" {
				return errors.New("connection refused")
			}
			return nil
		}
		c.cfg.Recipe.Role = func(context.Context, string) (system.Role, error) { return system.Leader, nil }
		if err := c.Kill(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		var ns *NotServingError
		if err := c.Restart(ctx, "n1"); !errors.As(err, &ns) || ns.Node != "n1" || ns.Why != "exited (exit code 3)" {
			t.Fatalf("restart: %v; want n1 exited", err)
		}
		if waited := time.Since(started); waited > 2*aliveEvery {
			t.Errorf("told after %s, want within %s", waited, 2*aliveEvery)
		}
		log.all = nil
		if err := c.Heal(ctx); err != nil {
			t.Fatalf("heal: %v", err)
		}
		if i := slices.IndexFunc(log.all, func(call string) bool {
			return strings.HasPrefix(call, "n1 start") || strings.HasPrefix(call, "n1 signal")
		}); i >= 0 {
			t.Errorf("heal asked the gone node: %q", log.all[i])
		}
		if roles, err := c.Roles(ctx); err != nil || roles["n1"] != system.Down || roles["n2"] != system.Leader {
			t.Errorf("roles %v (%v), want n1 down", roles, err)
		}
	})
}

// A node that never serves is told apart from other failures, so that a test can take a
// machine too busy to start a server as a try that fell short rather than a broken lock.
func TestANodeThatNeverServesIsNotServing(t *testing.T) {
	c, _ := fakeCluster(&fake{name: "n1"})
	c.cfg.Recipe.Ready = func(context.Context, string) error { return errors.New("connection refused") }
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the wait's deadline has passed
	err := c.WaitNodes(ctx)
	var ns *NotServingError
	if !errors.As(err, &ns) || ns.Node != "n1" || !strings.Contains(err.Error(), "node n1 (n1:1) not serving") {
		t.Fatalf("WaitNodes: %v; want node n1 not serving", err)
	}
}
