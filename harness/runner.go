package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockbreaker/lockbreaker/analysis"
	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/links"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/nodes"
	"github.com/lockbreaker/lockbreaker/results"
	runspec "github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
	"github.com/lockbreaker/lockbreaker/workloads/storage"
)

// Runner runs tests.
type Runner struct {
	// ResultsRoot is where run directories are made.
	ResultsRoot string
	// Progress receives short lines for a person watching; nil discards them.
	Progress io.Writer
	// Worker is the command that starts a worker process; nil means this executable.
	Worker []string
	// Trends are the suites the store's index shows above its runs (suite.StoreTrends);
	// nil shows none.
	Trends results.Trends
	// Clusters, when set, lends runs a cluster kept from the run before where that is
	// sound, and keeps theirs until Clusters.Close; nil starts and stops a cluster for
	// every run.
	Clusters *Clusters
	// Login is how the machines of a spec with a nodes file are logged in to.
	Login machines.Login
	// NoInstall takes the machines' packages as installed: none is installed on them, and
	// a machine that lacks one is refused.
	NoInstall bool
}

// Run runs one test and checks its history. It returns the run's directory and summary;
// an error means the harness itself failed (or was interrupted), in which case whatever
// was recorded has still been checked and written when possible. Whatever happens, no
// container, worker or fault outlives Run.
func (r Runner) Run(ctx context.Context, spec Spec) (string, results.Summary, error) {
	checked, err := CheckSpec(spec)
	if err != nil {
		return "", results.Summary{}, err
	}
	spec = checked.spec
	// A program that cannot start here (its runtime missing) and a system that cannot (no
	// Docker) say so before a run directory or latest link exists.
	if err := CheckProgram(ctx, spec); err != nil {
		return "", results.Summary{}, err
	}
	place, err := placeOf(ctx, checked, r.Login, !r.NoInstall)
	if err != nil {
		return "", results.Summary{}, orInterrupted(ctx, err)
	}
	defer place.close()
	run, err := results.NewRun(r.ResultsRoot, spec.Test, time.Now())
	if err != nil {
		return "", results.Summary{}, &SpecError{Reason: err.Error()}
	}
	// Mark it at once, so even a run that crashes is found as results/latest.
	if err := run.MarkLatest(); err != nil {
		return "", results.Summary{}, err
	}
	// The run's id names and labels all it creates: its directory's name (the time, unique
	// within its test), this process and its count of runs, since runs side by side may
	// start in the same second.
	id := fmt.Sprintf("%s-%d-%d", run.ID(), os.Getpid(), runsStarted.Add(1))
	t := &trial{Runner: r, Checked: checked, run: run, id: id, progress: r.Progress, place: place}
	if t.progress == nil {
		t.progress = io.Discard
	}
	summary, err := t.execute(ctx)
	return run.Dir(), summary, errors.Join(err, results.WriteIndex(r.ResultsRoot, r.Trends))
}

// errInterrupted is a run's error when its context was cancelled (Ctrl-C, SIGTERM).
var errInterrupted = errors.New("interrupted")

// orInterrupted returns errInterrupted for an error met after ctx was cancelled: the
// interrupt, not the step that noticed it, is what the user needs to hear.
func orInterrupted(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return errInterrupted
	}
	return err
}

// trial is one run in progress.
type trial struct {
	Runner
	Checked  // the spec as it runs, and what it names, looked up
	run      *results.Run
	id       string // see Run
	progress io.Writer
	log      *slog.Logger
	logs     io.Writer // run.log, shared by the harness and the workers
	// clientNotes are what the run learnt of its lock clients (programs lost).
	clientNotes []string
	// endNotes say why the run, or its nemesis, ended before the time limit.
	endNotes []string
	endMu    sync.Mutex
	// place is where the nodes live, asked before the run began.
	place place
}

func (t *trial) noteEnd(format string, args ...any) {
	t.endMu.Lock()
	defer t.endMu.Unlock()
	t.endNotes = append(t.endNotes, fmt.Sprintf(format, args...))
}

func (t *trial) say(format string, args ...any) {
	fmt.Fprintf(t.progress, format+"\n", args...)
	t.log.Info(fmt.Sprintf(format, args...))
}

func (t *trial) execute(ctx context.Context) (results.Summary, error) {
	started := time.Now()
	specJSON, err := json.MarshalIndent(t.spec, "", "  ")
	if err != nil {
		return results.Summary{}, fmt.Errorf("encode spec: %w", err)
	}
	if err := results.WriteAtomic(t.run.Path(results.SpecFile), append(specJSON, '\n')); err != nil {
		return results.Summary{}, fmt.Errorf("spec: %w", err)
	}
	logFile, err := os.Create(t.run.Path(results.RunLogFile))
	if err != nil {
		return results.Summary{}, fmt.Errorf("create run log: %w", err)
	}
	defer logFile.Close()
	t.logs = &lockedWriter{w: logFile}
	t.log = slog.New(slog.NewTextHandler(t.logs, nil))
	rec, err := history.Create(t.run.Path(results.HistoryFile))
	if err != nil {
		return results.Summary{}, err
	}

	runErr := errors.Join(t.record(ctx, rec), rec.Close())
	if runErr != nil {
		t.log.Error("run failed", "err", runErr)
	}

	summary := results.Summary{Test: t.spec.Test, RunID: t.id, Spec: specJSON, Started: started, Finished: time.Now(),
		Notes: slices.Concat(t.notes(), t.clientNotes, t.endNotes), Lease: t.lease()}
	if runErr != nil {
		summary.Error = runErr.Error()
	}
	// Judged from the file, as check judges it, so that the run's memory does not grow with
	// its length and a check of it later writes the same results.json.
	summary, err = analysis.File(context.WithoutCancel(ctx), t.run.Dir(), t.run.Path(results.HistoryFile), summary, checkers.DefaultLimits)
	return summary, errors.Join(runErr, err)
}

// notes are facts about the setup a reader needs in order to judge the verdicts.
func (t *trial) notes() []string {
	var notes []string
	if len(t.spec.ClientCmd) > 0 {
		notes = append(notes, fmt.Sprintf("each lock client runs the program %s, which acquires and releases over the exec protocol "+
			"(docs/protocol.md) while its worker reads and writes the storage", shellwords.Join(t.spec.ClientCmd)))
	}
	if t.nemesis.Needs().Links {
		notes = append(notes, "each client reached the nodes and the storage through proxies of its own on its links "+
			"(Toxiproxy, in the harness), which nemesis "+t.nemesis.Name()+" slows, holds or breaks")
	}
	notes = append(append(notes, t.fencingNotes()...), t.serverNotes()...)
	if c := t.sys.Container; c != nil && c.Notes != nil {
		notes = append(notes, c.Notes(system.Cluster{Nodes: t.nodes, TTL: t.spec.TTL.Std(), Pooler: t.spec.Pooler})...)
	}
	return notes
}

func (t *trial) fencingNotes() []string {
	var notes []string
	for _, c := range t.clients {
		if !c.Tokens {
			notes = append(notes, fmt.Sprintf("%s grants no fencing token: %s", c.Name, c.NoTokens))
		}
	}
	if notes != nil {
		return notes
	}
	if !t.spec.Fencing {
		return []string{"fencing off: the storage accepts every request, whatever its token"}
	}
	if t.sys.TokenCaveat != "" {
		return []string{t.sys.TokenCaveat}
	}
	return nil
}

// serverNotes say what a killed node comes back with and when, and what the primary
// demands of its replicas: the settings that decide what a crash costs. The chosen faults'
// kinds say what of the settings matters to them (history.Notes: when a killed node is
// back, how long every node is kept down).
func (t *trial) serverNotes() []string {
	var notes []string
	if p := system.Persistence(t.spec.Persistence); t.nemesis.Needs().Restarts && p.Says() != "" {
		notes = append(notes, fmt.Sprintf("persistence %s: %s", p, p.Says()))
		if p == system.PersistNone && t.spec.Fencing {
			notes = append(notes, "and its fencing-token count: its tokens start again from nothing, and the storage "+
				"accepts a stale holder's request (the fencing checker reports each)")
		}
	}
	notes = append(notes, history.Notes(t.spec.Nemesis, history.Settings{Pause: t.spec.PauseLength(),
		RestartAfter: t.spec.RestartDelay(), RestartAfterTTL: t.spec.RestartDelayTTL})...)
	if t.spec.MinReplicas > 0 {
		notes = append(notes, fmt.Sprintf("min-replicas-to-write %d, min-replicas-max-lag %s: the primary refuses writes "+
			"unless that many replicas acknowledged within the lag", t.spec.MinReplicas, t.spec.MinReplicasMaxLag.Std()))
	}
	return notes
}

// runsStarted counts this process's runs, for their ids.
var runsStarted atomic.Int64

// record sets everything up, lets the clients and the nemesis loose for the time limit,
// and tears everything down again, recording into rec: the procedure of a run, each step
// a function. Whatever ends it (an error, Ctrl-C), what was started is healed and stopped.
func (t *trial) record(ctx context.Context, rec *history.Recorder) (err error) {
	cluster, err := t.Clusters.start(ctx, t.sys, t.spec, t.clusterSetup())
	if err != nil {
		return orInterrupted(ctx, err)
	}
	defer func() { err = errors.Join(err, t.tearDown(context.WithoutCancel(ctx), cluster)) }()
	cnet, shared := t.place.clientNetwork(ctx, cluster, t.nemesis.Needs())
	if cnet != nil {
		defer func() { err = errors.Join(err, cnet.Close(context.WithoutCancel(ctx))) }()
	}
	store, addrs, err := t.startStorage(cnet)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	env := t.nemesisEnv(ctx, cluster, rec)
	// A fault armed before the clients start meets their first requests.
	if err := t.arm(ctx, env); err != nil {
		return err
	}
	configs := t.workerConfigs(t.id, cluster.Addrs(), cluster.MonitorAddrs(), store.Addr())
	proxies, err := openLinks(t.nemesis.Needs(), store.listen(), cluster.Addrs(), store.Addr(), configs)
	if err != nil {
		return errors.Join(fmt.Errorf("proxies on the clients' links: %w", err), t.nemesis.Heal(context.WithoutCancel(ctx), env))
	}
	if proxies != nil {
		defer proxies.Close()
	}
	stopPooled := t.watchPooler(env)
	defer stopPooled()
	workers, err := t.startWorkers(ctx, &env, addrs, shared, proxies, configs, rec)
	if err != nil {
		return err
	}
	nemErr := t.unserved(env, t.unleash(ctx, env, workers, rec))
	// Interrupted means cut short. What follows runs to its end whatever the signals, so
	// an interrupt from here on leaves a complete history and its verdict.
	interrupted := ctx.Err() != nil
	healErr := t.unserved(env, t.nemesis.Heal(context.WithoutCancel(ctx), env))
	workers.stop(configs[0].cycleBound() + 5*time.Second)
	stopPooled()
	t.say("all faults healed, clients stopped")
	finalErr := t.finalRead(ctx, rec, store.Addr())
	if note := workers.lostNote(); note != "" {
		t.clientNotes = append(t.clientNotes, note)
	}
	if interrupted {
		return errors.Join(errInterrupted, nemErr, healErr)
	}
	return errors.Join(workers.clientErr(), nemErr, healErr, finalErr)
}

// unserved records each node in err that did not serve again after a fault took it down
// (nodes.NotServingError) as what the run found (history.NotServing): the service did not
// come back, which is no failure of the harness. It returns err without them, nil when they
// were all of it.
func (t *trial) unserved(env nemesis.Env, err error) error {
	var others bool
	for _, leaf := range leaves(err) {
		ns, ok := leaf.(*nodes.NotServingError)
		if !ok {
			others = true
			continue
		}
		t.say("node %s did not serve again after the faults: the run ends here (its log: %s)", ns.Node,
			filepath.Join(results.NodesDir, ns.Node+".log"))
		env.Record(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.NotServing,
			Time: history.Now(), Targets: []string{ns.Node}, Message: ns.Short()})
	}
	if others {
		return err
	}
	return nil
}

// leaves are the errors err is made of: itself when it wraps none or is a NotServingError
// (which wraps its wait's end), else the leaves of each error it wraps.
func leaves(err error) []error {
	switch e := err.(type) {
	case nil:
		return nil
	case *nodes.NotServingError:
		return []error{e}
	case interface{ Unwrap() []error }:
		var all []error
		for _, inner := range e.Unwrap() {
			all = append(all, leaves(inner)...)
		}
		return all
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return leaves(inner)
		}
	}
	return []error{err}
}

// clusterSetup is the cluster the run needs: its nodes, lease, the levers its nemesis
// pulls and the servers' settings.
func (t *trial) clusterSetup() clusterSetup {
	return clusterSetup{runID: t.id, nodes: t.spec.Nodes, ttl: t.spec.TTL.Std(), needs: t.nemesis.Needs(),
		servers: serverSettingsOf(t.spec), logs: t.run.Path(results.NodesDir), progress: io.MultiWriter(t.progress, t.logs),
		place: t.place, clocks: machineClocks(t.spec, t.nemesis.Needs())}
}

// tearDown heals the cluster, brings its nodes' logs into the run directory and stops it
// (or gives it back to be kept); ctx is the run's without its cancellation, so that it runs
// even after Ctrl-C.
func (t *trial) tearDown(ctx context.Context, cluster Cluster) error {
	err := cluster.Heal(ctx)
	if lerr := cluster.CollectLogs(ctx, t.run.Path(results.NodesDir)); lerr != nil {
		t.log.Warn("collect node logs", "err", lerr)
	}
	return errors.Join(err, cluster.Stop(ctx))
}

// runStorage is the run's fenced register and its log in the run directory.
type runStorage struct {
	*storage.Server
	log *os.File
}

// listen is the address the storage listens on, where the proxies on the clients' links
// listen too.
func (s runStorage) listen() netip.Addr {
	addr, _ := netip.ParseAddrPort(s.Addr())
	return addr.Addr()
}

func (s runStorage) Close() error { return errors.Join(s.Server.Close(), s.log.Close()) }

// startStorage starts the fenced register where the clients reach it: on the gateway of
// cnet, the cluster network, when each client has an address of its own there (addrs; nil
// when cnet is), else on loopback.
func (t *trial) startStorage(cnet *clientnet.Network) (runStorage, *clientAddrs, error) {
	log, err := os.Create(t.run.Path(results.StorageFile))
	if err != nil {
		return runStorage{}, nil, fmt.Errorf("create storage log: %w", err)
	}
	listen := "127.0.0.1:0"
	if cnet != nil {
		listen = netip.AddrPortFrom(cnet.Gateway(), 0).String()
	}
	server, err := storage.Listen(listen, t.spec.Fencing, log)
	if err != nil {
		return runStorage{}, nil, errors.Join(err, log.Close())
	}
	store := runStorage{Server: server, log: log}
	if cnet == nil {
		return store, nil, nil
	}
	addr, err := netip.ParseAddrPort(store.Addr())
	if err != nil {
		return runStorage{}, nil, errors.Join(fmt.Errorf("storage address: %w", err), store.Close())
	}
	return store, &clientAddrs{net: cnet, storage: addr}, nil
}

// nemesisEnv is everything the nemesis may act on but the workers, which startWorkers adds.
func (t *trial) nemesisEnv(ctx context.Context, cluster Cluster, rec *history.Recorder) nemesis.Env {
	return nemesis.Env{
		Nodes: cluster,
		Subscribe: func() <-chan history.Event {
			ch := make(chan history.Event, 4096)
			rec.Subscribe(ch)
			return ch
		},
		Record:              func(e history.Event) { rec.Record(e) },
		Seed:                t.spec.Seed,
		Pause:               t.spec.PauseLength(),
		PauseFixed:          t.spec.Pause != 0,
		Interval:            t.spec.Interval.Std(),
		ClockOffset:         t.spec.ClockSkew(),
		ClockRate:           t.spec.ClockRate,
		TTL:                 t.spec.TTL.Std(),
		Work:                t.spec.Work.Std(),
		RestartAfter:        t.spec.RestartDelay(),
		IndependentMajority: t.sys.IndependentMajority,
		QueueLock:           t.queueLock(),
		Undirected:          t.spec.Undirected,
		Victims:             t.spec.Victims,
		ReplicaLag:          t.spec.ReplicaLag(),
		Reach:               reachOf(t.spec),
		Script:              scriptOf(t.spec),
		Halt:                ctx.Done(),
	}
}

// scriptOf is a spec's written schedule, each nemesis's steps apart; nil when it has none.
func scriptOf(s Spec) map[string][]nemesis.Shot {
	if len(s.Schedule) == 0 {
		return nil
	}
	script := map[string][]nemesis.Shot{}
	for _, st := range s.Schedule {
		script[st.Fault] = append(script[st.Fault], nemesis.Shot{At: st.At.Std(), Target: st.Target, For: st.For.Std(),
			When: st.When, HoldOn: st.Until == runspec.Takeover})
	}
	return script
}

// reachOf is where a checked spec's link faults strike.
func reachOf(s Spec) nemesis.LinkReach {
	node, _ := s.LinkNodeIndex() // checked by CheckSpec
	return nemesis.LinkReach{Node: node, Answers: s.LinkAnswers}
}

// arm puts a fault that must meet the clients' very first requests in place (nemesis.Armer),
// and heals what it did when that fails.
func (t *trial) arm(ctx context.Context, env nemesis.Env) error {
	a, ok := t.nemesis.(nemesis.Armer)
	if !ok {
		return nil
	}
	if err := a.Arm(ctx, env); err != nil {
		return errors.Join(err, t.nemesis.Heal(context.WithoutCancel(ctx), env))
	}
	return nil
}

// startWorkers starts a worker per config, on its own address (addrs) when the clients have
// one (else shared says why not), gives the nemesis its levers on them (env), and waits
// until every client is at work.
func (t *trial) startWorkers(ctx context.Context, env *nemesis.Env, addrs *clientAddrs, shared error, proxies *links.Set,
	configs []WorkerConfig, rec *history.Recorder) (*pool, error) {
	command, err := t.workerCommand()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	workers, err := startPoolOn(addrs, command, configs, rec, t.logs)
	if err != nil {
		return nil, err
	}
	if addrs != nil {
		t.say("%d clients on addresses of their own, started in %s", len(configs), time.Since(started).Round(time.Millisecond))
	} else {
		t.say("%d clients share one address: %v", len(configs), shared)
	}
	env.Workers, env.Clients = workers, clientsOf(workers)
	if proxies != nil {
		env.Links = linksLever{set: proxies, workers: workers}
	}
	// The time limit counts from when every client is at work, each answered once: a client
	// whose program takes seconds to start (a JVM beside other runs on a busy machine), or
	// whose first connection does, would otherwise spend the run starting, and a fault aimed
	// at a holder would find none. Waiting is bounded by the time limit itself.
	if waited := clientsAtWork(ctx, env.Subscribe(), len(configs), t.spec.TimeLimit.Std(), workers.broke); waited > time.Second {
		t.say("every client at work after %s", waited.Round(100*time.Millisecond))
	}
	return workers, nil
}

// unleash lets the clients and the nemesis loose until the time limit, an interrupt, a
// broken lock client, a nemesis that cannot inject its faults, or (--stop-at-first-violation)
// shortly after the first violation; meanwhile it reports progress and watches the nodes'
// roles. It returns the nemesis's error.
func (t *trial) unleash(ctx context.Context, env nemesis.Env, workers *pool, rec *history.Recorder) error {
	if t.spec.StopEarly {
		t.say("%d clients running for %s at most, nemesis %s; the run ends %s after its first violation",
			t.spec.Clients, t.spec.TimeLimit.Std(), t.nemesis.Name(), runspec.StopGrace)
	} else {
		t.say("%d clients running for %s, nemesis %s", t.spec.Clients, t.spec.TimeLimit.Std(), t.nemesis.Name())
	}
	limit, cancel := context.WithTimeout(ctx, t.spec.TimeLimit.Std())
	defer cancel()
	// A lock client that broke ends the run: nothing it did later could be trusted.
	go func() {
		select {
		case <-workers.broke:
			cancel()
		case <-limit.Done():
		}
	}()
	nemCtx, stopNemesis := context.WithCancel(limit)
	defer stopNemesis()
	var ending sync.WaitGroup
	defer ending.Wait()
	t.stopEarly(limit, cancel, stopNemesis, env.Subscribe, &ending)
	stopProgress := t.reportProgress(limit, rec)
	defer stopProgress()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		nemesis.WatchRoles(limit, env, rolesEvery)
	}()
	nemErr := t.nemesis.Run(nemCtx, env)
	if nemErr != nil {
		cancel() // a nemesis that cannot inject its faults makes the rest of the run moot
	}
	<-limit.Done()
	<-watched
	return nemErr
}

// clientsAtWork waits until n clients have each had an operation answered, at most bound,
// or until ctx ends or a client broke, and says how long it waited.
func clientsAtWork(ctx context.Context, events <-chan history.Event, n int, bound time.Duration, broke <-chan struct{}) time.Duration {
	started := time.Now()
	timeout := time.NewTimer(bound)
	defer timeout.Stop()
	working := map[int]bool{}
	for len(working) < n {
		select {
		case <-ctx.Done():
		case <-broke:
		case <-timeout.C:
		case e := <-events:
			if e.Process >= 0 && e.Type != history.Invoke {
				working[e.Process] = true
			}
			continue
		}
		break
	}
	return time.Since(started)
}

// stopEarly starts the watches that end the run (cancel) a grace after its first
// violation and the nemesis (stopNemesis) after its last allowed fault, when the spec
// asks; each says so in the run's notes. running counts them until they have returned.
func (t *trial) stopEarly(limit context.Context, cancel, stopNemesis context.CancelFunc, subscribe func() <-chan history.Event, running *sync.WaitGroup) {
	if t.spec.StopEarly {
		events := subscribe()
		running.Go(func() {
			stopAtFirstOverlap(events, limit.Done(), runspec.StopGrace, func() {
				t.noteEnd("the run stopped early, as --stop-at-first-violation asks: %s after two clients were first seen "+
					"holding the lock at once (what happened first says when)", runspec.StopGrace)
				cancel()
			})
		})
	}
	if t.spec.Faults > 0 {
		events := subscribe()
		running.Go(func() {
			stopAfterFaults(limit, events, t.spec.Faults, func() {
				t.noteEnd("the nemesis stopped after %d of its faults had begun, as --faults asks", t.spec.Faults)
				stopNemesis()
			})
		})
	}
}

// watchPooler records the hazard a pooler makes with no fault (nemesis.WatchPooledSessions)
// from the clients' first grant to their last, when the spec puts one in front of the
// servers. The returned function stops it once it has followed every event recorded so
// far; it may be called again.
func (t *trial) watchPooler(env nemesis.Env) (stop func()) {
	if t.spec.Pooler == "" {
		return func() {}
	}
	events := env.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		nemesis.WatchPooledSessions(ctx, events, env.Record, t.spec.Pooler)
	}()
	return func() { cancel(); <-done }
}

// clientsOf is the pool as a nemesis.ClientNetwork, or nil when its workers share one
// address.
func clientsOf(p *pool) nemesis.ClientNetwork {
	if p.addrs == nil {
		return nil
	}
	return p
}

func (t *trial) workerCommand() ([]string, error) {
	if t.Worker != nil {
		return t.Worker, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for workers: %w", err)
	}
	return []string{exe, "worker"}, nil
}

// rolesEvery is how often the nodes are asked for their roles during a run.
const rolesEvery = 250 * time.Millisecond

func (t *trial) workerConfigs(runID string, nodes, sentinels []string, storageAddr string) []WorkerConfig {
	ttl := t.spec.TTL.Std()
	// The storage gets longer than a lock node (nodeTimeout), since it is never faulted.
	const storageTimeout = 2 * time.Second
	rng := rand.New(rand.NewSource(t.spec.Seed))
	configs := make([]WorkerConfig, t.spec.Clients)
	for p := range configs {
		configs[p] = WorkerConfig{
			Run:     runID,
			Process: p,
			Client:  t.clients[p%len(t.clients)].Name,
			Lock: workloads.Config{
				System:    t.spec.System,
				Program:   t.spec.ClientCmd,
				Nodes:     nodes,
				Sentinels: sentinels,
				Key:       t.spec.Key,
				TTL:       ttl,
				Fencing:   t.spec.Fencing,
				OpTimeout: nodeTimeout(ttl),
				Retry:     t.spec.Retry.Std(),
				Pooler:    t.spec.Pooler,
				Extend:    t.spec.ExtendEvery != 0,
				Owner:     fmt.Sprintf("%s-w%d-%x", runID, p, rng.Uint32()),
			},
			Storage:     storageAddr,
			Work:        t.spec.Work.Std(),
			ExtendEvery: t.spec.ExtendEvery.Std(),
			// An extend may wait as long as an acquire, and a fault's length more: a slow
			// answer (one a fault holds on the holder's links) must reach it, not a timeout.
			ExtendTimeout:  2*ttl + t.spec.PauseLength(),
			AcquireTimeout: 2 * ttl,
			OpTimeout:      storageTimeout,
			Period:         t.spec.CyclePeriod(),
			BusyWork:       t.nemesis.Needs().BusyHolders,
			NameGrants:     t.spec.Mixed(),
		}
	}
	return configs
}

// finalRead records what the storage kept, after every client stopped.
func (t *trial) finalRead(ctx context.Context, rec *history.Recorder, addr string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	inv := history.Event{Type: history.Invoke, Process: history.HarnessProcess, Func: history.FinalRead, Key: t.spec.Key, Time: history.Now()}
	rec.Record(inv)
	c, err := storage.Dial(ctx, addr, history.HarnessProcess)
	var value int64
	if err == nil {
		defer c.Close()
		value, err = c.Do(ctx, storage.Request{Op: storage.OpInspect, Key: t.spec.Key})
	}
	done := inv
	done.Time = history.Now()
	if err != nil {
		done.Type, done.Message = history.Info, err.Error()
		rec.Record(done)
		return fmt.Errorf("final read: %w", err)
	}
	done.Type, done.Value = history.OK, history.Int64(value)
	rec.Record(done)
	return nil
}

// reportProgress prints a line every few seconds until stopped, so a long run is
// visibly alive: time, operations by outcome, faults, and the harness's own resident
// memory, which stays flat however long the run (the history is on disk, not in memory).
func (t *trial) reportProgress(ctx context.Context, rec *history.Recorder) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				n := rec.Tally()
				line := fmt.Sprintf("  %3.0fs/%s  ok %d  fail %d  info %d  faults %d", time.Since(start).Seconds(),
					t.spec.TimeLimit.Std(), n.OK, n.Fail, n.Info, n.Faults)
				if rss, ok := residentMemory(); ok {
					line += fmt.Sprintf("  harness RSS %d MB", rss>>20)
				}
				t.say("%s", line)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// residentMemory is this process's resident set size in bytes, VmRSS in
// /proc/self/status; false where there is no such file.
func residentMemory() (int64, bool) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// lease is what the run's lock promises its holders: the TTL, kept as its clients keep
// their grants when they all keep them alike, else as nobody knows.
func (t *trial) lease() *history.Lease {
	kept := t.clients[0].Lease
	for _, c := range t.clients[1:] {
		if c.Lease != kept {
			kept = history.KeptUnknown
		}
	}
	return &history.Lease{TTL: t.spec.TTL.Std(), Kept: kept}
}

// queueLock says whether the run's lock clients, every one, queue their waiters at the
// service.
func (t *trial) queueLock() bool {
	return !slices.ContainsFunc(t.clients, func(c workloads.Client) bool { return !c.Queues })
}
