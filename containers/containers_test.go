package containers

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"

	"github.com/lockbreaker/lockbreaker/nodes/nodestest"
	"github.com/lockbreaker/lockbreaker/system"
)

// These tests run real containers. They skip only when Docker is unreachable;
// the first one to need the node image builds it (minutes, once per hash).

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// nodeImage skips t when Docker is unreachable and returns the node image.
func nodeImage(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker: real containers")
	}
	if err := Ping(context.Background()); err != nil {
		t.Skipf("needs Docker: %v", err)
	}
	imageOnce.Do(func() {
		start := time.Now()
		imageRef, imageErr = EnsureImage(context.Background(), testWriter{t})
		t.Logf("EnsureImage: %s in %s", imageRef, time.Since(start).Round(time.Millisecond))
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageRef
}

// systemImage returns the image the nodes of system run, building it on first use: the
// node image, or the system's own layer on it.
func systemImage(t *testing.T, system string) string {
	t.Helper()
	base := nodeImage(t)
	start := time.Now()
	ref, err := EnsureSystemImage(context.Background(), system, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if ref != base {
		t.Logf("EnsureSystemImage(%s): %s in %s", system, ref, time.Since(start).Round(time.Millisecond))
	}
	return ref
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// startCluster starts a cluster for t and stops it when t ends.
func startCluster(t *testing.T, spec Spec) *Cluster {
	t.Helper()
	spec.Image = systemImage(t, spec.System)
	spec.RunID = fmt.Sprintf("test-%s-%d", strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"), time.Now().UnixNano())
	start := time.Now()
	c, err := Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s cluster of %d started in %s", c.Spec().System, len(c.Nodes()), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		assertNoLeftovers(t, spec.RunID)
	})
	return c
}

// assertNoLeftovers fails t when a container or network of run runID exists.
func assertNoLeftovers(t *testing.T, runID string) {
	t.Helper()
	cli, err := docker()
	if err != nil {
		t.Fatal(err)
	}
	f := make(client.Filters).Add("label", LabelRun+"="+runID)
	ctrs, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	nets, err := cli.NetworkList(context.Background(), client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	if len(ctrs.Items)+len(nets.Items) > 0 {
		t.Errorf("run %s left %d containers and %d networks", runID, len(ctrs.Items), len(nets.Items))
	}
}

// redisPing pings addr on a fresh connection within timeout.
func redisPing(addr string, timeout time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// eventually retries f for up to 10 s.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, f)
}

// eventuallyWithin retries f for up to d.
func eventuallyWithin(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEnsureImageIsCached(t *testing.T) {
	ref := nodeImage(t)
	var progress strings.Builder
	again, err := EnsureImage(context.Background(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	if again != ref || again != ImageRef() {
		t.Errorf("second EnsureImage = %s, first %s, ImageRef %s", again, ref, ImageRef())
	}
	if progress.Len() > 0 {
		t.Errorf("second EnsureImage built again:\n%s", progress.String())
	}
}

// One single-Redis cluster under faketime serves every fault in turn; each
// subtest heals what it broke.
func TestSingleRedis(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Spec{System: "redis", Faketime: true, Partitions: true})
	ctx := context.Background()
	n := c.Nodes()[0]
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
	defer rdb.Close()

	t.Run("SET NX from the host", func(t *testing.T) {
		if ok, err := rdb.SetNX(ctx, "lock", "a", time.Minute).Result(); err != nil || !ok {
			t.Fatalf("first SET NX = %v, %v; want true", ok, err)
		}
		if ok, err := rdb.SetNX(ctx, "lock", "b", time.Minute).Result(); err != nil || ok {
			t.Fatalf("second SET NX = %v, %v; want false", ok, err)
		}
	})

	t.Run("SIGSTOP freezes the server, SIGCONT resumes it", func(t *testing.T) {
		if err := c.Signal(ctx, n.Name, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer c.Signal(ctx, n.Name, syscall.SIGCONT)
		if err := redisPing(n.Addr(), 300*time.Millisecond); err == nil {
			t.Fatal("a stopped server answered PING")
		}
		if err := c.Signal(ctx, n.Name, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PING after SIGCONT", func() error { return redisPing(n.Addr(), time.Second) })
	})

	t.Run("a clock jump of +20 s expires a PX 10000 key", func(t *testing.T) {
		defer c.ResetClocks(ctx)
		if err := rdb.Set(ctx, "lease", "v", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.SetClock(ctx, n.Name, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Get(ctx, "lease").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("GET after +20 s: %v; want the key gone", err)
		}
		if err := c.ResetClocks(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, "lease", "v", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Get(ctx, "lease").Err(); err != nil {
			t.Fatalf("GET after reset: %v; want the key", err)
		}
	})

	t.Run("dropping the gateway cuts the host off, HealNetwork restores it", func(t *testing.T) {
		defer c.HealNetwork(ctx)
		if err := c.DropFrom(ctx, n.Name, c.Gateway()); err != nil {
			t.Fatal(err)
		}
		if err := redisPing(n.Addr(), 500*time.Millisecond); err == nil {
			t.Fatal("the host reached a node that drops the gateway")
		}
		if err := c.HealNetwork(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PING after HealNetwork", func() error { return redisPing(n.Addr(), time.Second) })
	})

	t.Run("offsets reach libfaketime as seconds", func(t *testing.T) {
		defer c.ResetClocks(ctx)
		// "+500ms" would mean 500 minutes to libfaketime.
		if err := c.SetClock(ctx, n.Name, -500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Exec(ctx, n.Name, "cat", nodeClockFile); err != nil || got != "-0.500" {
			t.Errorf("faketime file %q (%v), want -0.500", got, err)
		}
		// The way in through a shell in the node, where this host cannot reach into it.
		if err := (engineNode{Node: n, c: c}).putInNode(ctx, nodeClockFile, []byte("+1.250")); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Exec(ctx, n.Name, "cat", nodeClockFile); err != nil || got != "+1.250" {
			t.Errorf("faketime file %q (%v), want +1.250", got, err)
		}
	})

	t.Run("clock settings at once on one node each land whole", func(t *testing.T) {
		defer c.ResetClocks(ctx)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				if i%4 == 3 { // the way in through a shell in the node too
					errs[i] = (engineNode{Node: n, c: c}).putInNode(ctx, nodeClockFile, fmt.Appendf(nil, "+%d.000", i))
					return
				}
				errs[i] = c.SetClock(ctx, n.Name, time.Duration(i)*time.Second)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("two clock settings at once: %v", err)
		}
		got, err := c.Exec(ctx, n.Name, "sh", "-c", "cat "+nodeClockFile+"; ls "+path.Dir(nodeClockFile))
		if err != nil || strings.Contains(got, ".new") || !regexp.MustCompile(`^\+[0-7]\.000`).MatchString(got) {
			t.Errorf("after settings at once the clock file and its folder hold %q (%v): want one offset whole and no temporary file", got, err)
		}
	})

	t.Run("node control errors", func(t *testing.T) {
		if err := c.Signal(ctx, "n9", syscall.SIGSTOP); err == nil {
			t.Error("Signal accepted an unknown node")
		}
		if err := c.DropFrom(ctx, n.Name, "not-an-ip"); err == nil {
			t.Error("DropFrom accepted a bad address")
		}
		if _, err := c.Exec(ctx, n.Name, "false"); err == nil {
			t.Error("Exec of false succeeded")
		}
	})

	t.Run("CollectLogs", func(t *testing.T) {
		dir := t.TempDir()
		if err := c.CollectLogs(ctx, dir); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "n1.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "Ready to accept connections") {
			t.Errorf("n1.log does not show Redis starting:\n%s", b)
		}
	})

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoLeftovers(t, c.Spec().RunID)
	if err := c.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestRedlockFiveMasters(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Spec{System: "redlock"})
	if len(c.Nodes()) != 5 {
		t.Fatalf("%d nodes, want 5", len(c.Nodes()))
	}
	for _, n := range c.Nodes() {
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
		ok, err := rdb.SetNX(context.Background(), "lock", n.Name, time.Minute).Result()
		rdb.Close()
		if err != nil || !ok {
			t.Errorf("SET NX on %s: %v, %v; want an independent master", n.Name, ok, err)
		}
	}
}

type quietZKLogger struct{}

func (quietZKLogger) Printf(string, ...any) {}

// The ensemble runs under faketime: a +1 h wall-clock jump on one server shows
// in its log and does not stop the ensemble serving (ZooKeeper times sessions
// with nanoTime).
func TestZooKeeperEnsemble(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Spec{System: "zookeeper", Faketime: true, TTL: 2 * time.Second})
	ctx := context.Background()
	var addrs []string
	for _, n := range c.Nodes() {
		addrs = append(addrs, n.Addr())
	}
	zkCreate(t, addrs, "/lockbreaker")
	if leader, err := c.Leader(ctx); err != nil || !strings.HasPrefix(leader, "n") {
		t.Errorf("leader: %q, %v", leader, err)
	}

	if err := c.SetClock(ctx, "n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	defer c.ResetClocks(ctx)
	zkCreate(t, addrs[:1], "/lockbreaker/after-jump") // a session on n1 makes it log
	zk, _ := system.Lookup("zookeeper")
	for _, n := range c.Nodes() {
		eventually(t, n.Name+" serving after the jump", func() error { return zk.Container.Ready(ctx, n.Addr()) })
	}
	dir := t.TempDir()
	if err := c.CollectLogs(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if skew := maxLogSkew(t, filepath.Join(dir, "n1.log")); skew < 50*time.Minute {
		t.Errorf("n1's log runs at most %s ahead of real time, want about 1 h", skew)
	}
}

// zkCreate creates path through a session on servers. An ensemble that has just started,
// on a busy machine, may still drop a session, so the create is tried again for a minute;
// a try whose answer was lost may have made it.
func zkCreate(t *testing.T, servers []string, path string) {
	t.Helper()
	eventuallyWithin(t, time.Minute, fmt.Sprintf("create %s via %v", path, servers), func() error {
		conn, _, err := zk.Connect(servers, 4*time.Second, zk.WithLogger(quietZKLogger{}))
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		return nil
	})
}

// maxLogSkew returns how far ahead of the engine's real-time stamp the
// server's own log4j stamp runs, at most, over the lines of a collected log.
func maxLogSkew(t *testing.T, path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var skew time.Duration
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line) // engine stamp, server date, server time, ...
		if len(f) < 3 {
			continue
		}
		engine, err1 := time.Parse(time.RFC3339Nano, f[0])
		server, err2 := time.Parse("2006-01-02 15:04:05,000", f[1]+" "+f[2])
		if err1 == nil && err2 == nil {
			skew = max(skew, server.Sub(engine))
		}
	}
	return skew
}

func TestCleanRemovesARun(t *testing.T) {
	t.Parallel()
	c := startCluster(t, Spec{System: "redis"})
	removed, err := Clean(context.Background(), c.Spec().RunID)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("Clean removed %d, want 2 (container, network)", removed)
	}
	assertNoLeftovers(t, c.Spec().RunID)
}

// CleanStale removes a run whose owner process is gone and keeps live ones.
func TestCleanStaleKeepsLiveRuns(t *testing.T) {
	nodeImage(t) // skips without Docker
	cli, _ := docker()
	ctx := context.Background()
	dead := ownerLabels(fmt.Sprintf("test-dead-%d", time.Now().UnixNano()))
	dead[LabelOwnerStart] = "1" // this pid, but not this process
	live := ownerLabels(fmt.Sprintf("test-live-%d", time.Now().UnixNano()))
	for _, labels := range []map[string]string{dead, live} {
		name := "lockbreaker-" + labels[LabelRun]
		if _, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Labels: labels}); err != nil {
			t.Fatal(err)
		}
		defer Clean(ctx, labels[LabelRun])
	}
	if _, err := CleanStale(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoLeftovers(t, dead[LabelRun])
	f := make(client.Filters).Add("label", LabelRun+"="+live[LabelRun])
	if nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err != nil || len(nets.Items) != 1 {
		t.Errorf("CleanStale removed a live run's network (%v)", err)
	}
}

func TestSpecChecks(t *testing.T) {
	for _, spec := range []Spec{
		{RunID: "", Image: "i", System: "redis"},
		{RunID: "a b", Image: "i", System: "redis"},
		{RunID: "r", System: "redis"},
		{RunID: "r", Image: "i", System: "consul"},
		{RunID: "r", Image: "i", System: "etcd", Nodes: 1},
		{RunID: "r", Image: "i", System: "redis", Nodes: 3},
		{RunID: "r", Image: "i", System: "zookeeper", Nodes: 4},
		{RunID: "r", Image: "i", System: "local"},
		{RunID: "r", Image: "i", System: "zookeeper", Persistence: system.PersistNone},
		{RunID: "r", Image: "i", System: "redis", MinReplicas: 1},
	} {
		if _, _, err := spec.withDefaults(); err == nil {
			t.Errorf("%+v accepted", spec)
		}
	}
	s, _, err := Spec{RunID: "r", Image: "i", System: "redlock"}.withDefaults()
	if err != nil || s.Nodes != 5 {
		t.Errorf("redlock default: %d nodes, %v", s.Nodes, err)
	}
}

func TestAptSources(t *testing.T) {
	deb822 := `Types: deb
# a comment
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb-src
URIs: http://src.example/debian
Suites: bookworm
`
	if got := parseDeb822(deb822); len(got) != 1 || got[0].uri != "http://mirror.example/debian" || got[0].suites[0] != "bookworm" {
		t.Errorf("parseDeb822 = %+v", got)
	}
	oneLine := `# deb http://commented.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main
deb-src http://src.example/debian bookworm main
`
	if got := parseOneLine(oneLine); len(got) != 1 || got[0].uri != "http://mirror.example/debian" || got[0].suites[0] != "bookworm" {
		t.Errorf("parseOneLine = %+v", got)
	}
}

// The node image's two ways, the Dockerfile's COPY and mmdebstrap's copy-in, give the
// node's files the same contents and modes: the entry point is executable in both.
func TestBothWaysOfMakingTheNodeImageKeepTheFilesModes(t *testing.T) {
	dir := t.TempDir()
	if err := writeNodeFiles(dir); err != nil {
		t.Fatal(err)
	}
	copied := map[string]os.FileMode{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		rel, _ := filepath.Rel(dir, path)
		copied[rel] = info.Mode().Perm()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if copied["run"] != 0o755 || copied["faketime"] != 0o644 {
		t.Errorf("mmdebstrap's files: run %v, faketime %v; want run executable", copied["run"], copied["faketime"])
	}
	if b, err := os.ReadFile(filepath.Join(dir, "faketime")); err != nil || string(b) != "+0" {
		t.Errorf("faketime holds %q (%v), want the zero offset +0", b, err)
	}
	buildCtx, err := contextTar()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(buildCtx)
	built := map[string]os.FileMode{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rel, ok := strings.CutPrefix(h.Name, "node/"); ok {
			built[rel] = os.FileMode(h.Mode).Perm()
		}
	}
	if fmt.Sprint(built) != fmt.Sprint(copied) {
		t.Errorf("the build context's node files %v, mmdebstrap's %v: want the same", built, copied)
	}
}

// Heal is one contract wherever nodes live (nodes/nodestest): here in containers, on a
// Redlock of three, a node paused, cut off, off its clock and on a slow disk, another
// killed.
func TestHealContract(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	t.Parallel()
	c := startCluster(t, Spec{System: "redlock", Nodes: 3, Faketime: true, Partitions: true, Disks: true})
	nodestest.HealContract(t, c.Cluster, "n1", "n3")
}
