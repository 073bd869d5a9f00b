package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/containers/containerstest"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/workloads"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// Benchmarks of the harness's own cost. Figures are printed (b.ReportMetric), never
// asserted: they depend on the machine. Run them one at a time:
//
//	go test -p 1 -run '^$' -bench RunVersusBareLoop -benchtime 1x -v ./harness/   # needs Docker
//	go test -p 1 -run '^$' -bench RecordingPath ./harness/

// BenchmarkRunVersusBareLoop alternates the run and the bare loop benchRounds times,
// benchSeconds each: the machine's other load moves both, so a round's run is compared
// with the loop just after it, and the median of those ratios is reported.
const (
	benchRounds  = 7
	benchSeconds = 2
)

// BenchmarkRunVersusBareLoop measures, in one run, how many requests per second
// `lockbreaker run --system redis --nemesis none --clients 1 --work 0 --rate 0` makes,
// against a bare loop making the same requests to the same servers: the redis lock
// client's acquire (SET NX PX) and release (the compare-and-delete script) on the run's
// node, kept between runs, and a read and a write on a storage served by this process,
// one after another. The bare loop runs in a process of its own, as a worker does, and
// its storage logs every request to a file, as a run's does, but it records nothing: no
// events, no pump, no history. Each run and each loop uses a lock key of its own.
func BenchmarkRunVersusBareLoop(b *testing.B) {
	containerstest.Image(b) // skipped under -short or without Docker
	spec := DefaultSpec()
	spec.Nemesis, spec.Clients, spec.Work, spec.Rate = nil, 1, 0, 0
	spec.TimeLimit = Duration(benchSeconds * time.Second)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	clusters := NewClusters(spec)
	defer clusters.Close(context.Background())
	r := Runner{ResultsRoot: b.TempDir(), Worker: []string{exe}, Clusters: clusters}
	for b.Loop() {
		var bare, run, ratio []float64
		for i := range benchRounds {
			spec.Key = fmt.Sprintf("lock%d", i)
			run = append(run, runRate(b, r, spec))
			clusters.mu.Lock()
			if len(clusters.idle) != 1 {
				b.Fatal("the run's cluster was not kept")
			}
			kept := clusters.idle[0]
			clusters.mu.Unlock()
			spec.Key = fmt.Sprintf("bare%d", i)
			bare = append(bare, bareLoop(b, kept.Addrs(), spec))
			ratio = append(ratio, run[i]/bare[i])
		}
		b.Logf("bare loop %.0f, run %.0f requests/s, ratios %.2f", bare, run, ratio)
		b.ReportMetric(median(bare), "bare-req/s")
		b.ReportMetric(median(run), "run-req/s")
		b.ReportMetric(median(ratio), "ratio")
	}
}

func median(xs []float64) float64 {
	xs = slices.Sorted(slices.Values(xs))
	return xs[len(xs)/2]
}

// bareEnv makes the test binary the bare loop for that many seconds: it reads a
// WorkerConfig line and prints the requests it made and the seconds it took.
const bareEnv = "LOCKBREAKER_BENCH_BARE"

// bareLoop runs the bare loop against the lock nodes and a storage of its own for the
// spec's time limit and returns its requests per second.
func bareLoop(b *testing.B, nodes []string, spec Spec) float64 {
	log, err := os.Create(filepath.Join(b.TempDir(), results.StorageFile))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	store, err := storage.Listen("127.0.0.1:0", spec.Fencing, log)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cfg, _ := json.Marshal(WorkerConfig{Client: "redis", Storage: store.Addr(), OpTimeout: time.Second,
		Lock: workloads.Config{Nodes: nodes, Key: spec.Key, TTL: spec.TTL.Std(), OpTimeout: time.Second, Owner: "bare"}})
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%g", bareEnv, spec.TimeLimit.Std().Seconds()))
	cmd.Stdin, cmd.Stderr = bytes.NewReader(append(cfg, '\n')), os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("bare loop: %v", err)
	}
	var requests, seconds float64
	if _, err := fmt.Sscan(string(out), &requests, &seconds); err != nil {
		b.Fatalf("bare loop said %q: %v", out, err)
	}
	return requests / seconds
}

// runBare is the bare loop's process.
func runBare(seconds float64) error {
	var cfg WorkerConfig
	if err := json.NewDecoder(os.Stdin).Decode(&cfg); err != nil {
		return err
	}
	client, err := workloads.LookupClient(cfg.Client)
	if err != nil {
		return err
	}
	lock, err := client.New(cfg.Lock)
	if err != nil {
		return err
	}
	defer lock.Close()
	ctx := context.Background()
	c, err := storage.Dial(ctx, cfg.Storage, cfg.Process)
	if err != nil {
		return err
	}
	defer c.Close()
	requests := 0
	start := time.Now()
	for time.Since(start).Seconds() < seconds {
		if _, err := lock.Acquire(ctx); err != nil {
			return err
		}
		v, err := c.Do(ctx, storage.Request{Op: storage.OpRead, Key: cfg.Lock.Key})
		if err != nil {
			return err
		}
		if _, err := c.Do(ctx, storage.Request{Op: storage.OpWrite, Key: cfg.Lock.Key, Value: v + 1}); err != nil {
			return err
		}
		if err := lock.Release(ctx); err != nil {
			return err
		}
		requests += 4
	}
	fmt.Println(requests, time.Since(start).Seconds())
	return nil
}

// runRate runs spec with r and returns the client operations its history holds per
// second, from the first invocation to the last completion.
func runRate(b *testing.B, r Runner, spec Spec) float64 {
	dir, _, err := r.Run(context.Background(), spec)
	if err != nil {
		b.Fatal(err)
	}
	file, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	if err != nil {
		b.Fatal(err)
	}
	var first, last int64
	done := 0
	for _, e := range file.Events {
		if e.Process < 0 {
			continue // the nemesis and the harness's final read
		}
		if first == 0 {
			first = e.Time
		}
		if e.Type != history.Invoke {
			done++
			last = e.Time
		}
	}
	return float64(done) / time.Duration(last-first).Seconds()
}

// blastEnv makes the test binary a worker that records that many operations (an
// invocation and a completion each) as fast as it can and then waits to be stopped: the
// recording path with no lock or storage behind it.
const blastEnv = "LOCKBREAKER_BENCH_BLAST"

// The test binary started by a benchmark as its child process does the child's work and
// exits before any test runs.
func init() {
	if seconds, err := strconv.ParseFloat(os.Getenv(bareEnv), 64); err == nil {
		if err := runBare(seconds); err != nil {
			fmt.Fprintln(os.Stderr, "bare loop:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if n, err := strconv.Atoi(os.Getenv(blastEnv)); err == nil {
		blast(n)
		os.Exit(0)
	}
}

// blast is the blasting worker: it writes its events as a worker does, two at a time.
func blast(n int) {
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		os.Exit(1)
	}
	var cfg WorkerConfig
	if err := json.Unmarshal(in.Bytes(), &cfg); err != nil {
		os.Exit(1)
	}
	var batch bytes.Buffer
	out := json.NewEncoder(&batch)
	for i := range n {
		batch.Reset()
		inv := history.Event{Type: history.Invoke, Process: cfg.Process, Func: history.Write, Key: cfg.Lock.Key,
			Value: history.Int64(int64(i)), Time: history.Now()}
		done := inv
		done.Type, done.Time = history.OK, history.Now()
		done.EffectFrom, done.EffectTo = done.Time, done.Time
		out.Encode(inv)
		out.Encode(done)
		if _, err := os.Stdout.Write(batch.Bytes()); err != nil {
			os.Exit(1)
		}
	}
	for in.Scan() && in.Text() != StopLine {
	}
}

// BenchmarkRecordingPath measures the path every event takes at full rate: a worker
// process writes it to its stdout, the pool's pump reads it and the recorder appends it to
// history.jsonl. Each client is a process recording b.N operations.
func BenchmarkRecordingPath(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, clients := range []int{1, 5} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			b.Setenv(blastEnv, strconv.Itoa(b.N))
			rec, err := history.Create(filepath.Join(b.TempDir(), history.FileName))
			if err != nil {
				b.Fatal(err)
			}
			configs := make([]WorkerConfig, clients)
			for p := range configs {
				configs[p] = WorkerConfig{Process: p, Lock: workloads.Config{Key: "lock"}}
			}
			b.ResetTimer()
			start := time.Now()
			workers, err := startPool([]string{exe}, configs, rec, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			// A blasting worker reads its stop line only once it has written everything,
			// and stop returns when every pump has recorded its worker's last event.
			workers.stop(time.Minute)
			elapsed := time.Since(start)
			b.StopTimer()
			if err := rec.Close(); err != nil {
				b.Fatal(err)
			}
			events := 2 * clients * b.N
			if got := rec.Tally().Events; got != events {
				b.Fatalf("recorded %d events, want %d", got, events)
			}
			b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
		})
	}
}
