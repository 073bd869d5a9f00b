package harness

import (
	"fmt"
	osexec "os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/machines"
	"github.com/lockbreaker/lockbreaker/nemesis"
	runspec "github.com/lockbreaker/lockbreaker/spec"
	"github.com/lockbreaker/lockbreaker/sysfile"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// The spec a run is made from lives in package spec, which a check of a saved run reads
// without the harness; these names keep the harness's own API as it was.
type (
	// Spec is a test, as plain data: everything needed to run it again (spec.Spec).
	Spec = runspec.Spec
	// Duration is a time.Duration written as "2s" in spec files (spec.Duration).
	Duration = runspec.Duration
	// SpecError is bad input: the CLI reports it as a usage error (spec.Error).
	SpecError = runspec.Error
)

// The default load (spec.DefaultRate, spec.DefaultRetry).
const (
	DefaultRate  = runspec.DefaultRate
	DefaultRetry = runspec.DefaultRetry
)

// DefaultSpec is Kleppmann's scenario on a single Redis (spec.Default).
func DefaultSpec() Spec { return runspec.Default() }

// Checked is a spec this harness can run, with what checking it looked up. Only CheckSpec
// makes one, so holding one means: the spec is complete (its client, test name and the
// settings its system gives a default are filled in); its system exists here (a system
// file's is read and registered); its client runs on that system, with fencing tokens if
// it fences (every one of them, when several share the slots); its nemeses exist and suit the system at its size; its crash, replica and
// pooler settings apply to that system and those nemeses; and an exec client's program is
// found on this machine. Whether that program starts is CheckProgram's question, which
// runs it.
type Checked struct {
	spec    Spec
	sys     system.System
	clients []workloads.Client // in the order of the spec's ClientNames
	nemesis nemesis.Nemesis
	nodes   int
	// machines are the machines the nodes run on (the spec's nodes file), none in containers.
	machines []machines.Address
}

// Spec is the spec as it runs.
func (c Checked) Spec() Spec { return c.spec }

// System is the descriptor of the spec's system.
func (c Checked) System() system.System { return c.sys }

// Nodes is the cluster's size.
func (c Checked) Nodes() int { return c.nodes }

// lookUpClients looks up each of the spec's lock clients and refuses one that is not
// there, does not run on the spec's system, or has no fencing token when the spec fences.
func lookUpClients(s Spec) ([]workloads.Client, error) {
	var clients []workloads.Client
	for _, name := range s.ClientNames() {
		client, err := workloads.LookupClient(name)
		switch {
		case err != nil:
			return nil, &SpecError{Reason: err.Error()}
		case !client.RunsOn(s.System):
			return nil, specErrorf("client %s runs on %s, not on %s", quote.Short(name), strings.Join(client.Systems, " and "), quote.Short(s.System))
		case s.Fencing && !client.Tokens:
			return nil, specErrorf("--fencing on is not possible with client %s: %s", quote.Short(name), client.NoTokens)
		case s.ExtendEvery != 0 && !client.Extends:
			return nil, specErrorf("--extend-every is not possible with client %s: its lock cannot extend a lease", quote.Short(name))
		}
		clients = append(clients, client)
	}
	return clients, nil
}

// checkMachines refuses a machines file that cannot be read or names too few machines, and
// a system that does not run on machines.
// It returns the machines the nodes run on, one each, in node order, then the monitors'
// (Sentinel's); none without a file.
func checkMachines(s Spec, sys system.System, nodes int) ([]machines.Address, error) {
	if s.NodesFile == "" {
		return nil, nil
	}
	addrs, err := machines.ReadFile(s.NodesFile)
	switch {
	case err != nil:
		return nil, specErrorf("--nodes-file: %s", quote.ShortenAll(err.Error()))
	case machines.Runs(sys) != nil:
		return nil, specErrorf("--nodes-file: %v", machines.Runs(sys))
	}
	monitors := 0
	if m := sys.Container.Monitors; m != nil {
		monitors = m.Count
	}
	if len(addrs) < nodes+monitors {
		what := fmt.Sprintf("%d nodes", nodes)
		if monitors > 0 {
			what += fmt.Sprintf(" and %d monitors", monitors)
		}
		return nil, specErrorf("--nodes-file: %s runs on %s, and %s names %d machines", sys.Name, what, s.NodesFile, len(addrs))
	}
	return addrs[:nodes+monitors], nil
}

// CheckSpec is the one step that asks what a spec names of this process: it reads and
// registers the spec's system file, looks up its system, client and nemeses, refuses what
// does not fit together, and fills in the defaults that follow (the system's client, its
// persistence, Redis's replica lag, the test name). What is wrong with the spec on its face
// (spec.Spec.Validate) is said first. Every refusal is a *SpecError, one line. It starts
// nothing: a run (Runner.Run) and a suite's cells (suite.SpecCheck) are checked with it
// before anything exists.
func CheckSpec(s Spec) (Checked, error) {
	if err := s.Validate(); err != nil {
		return Checked{}, err
	}
	if err := useSystemFile(&s); err != nil {
		return Checked{}, err
	}
	sys, err := system.Lookup(s.System)
	if err != nil {
		return Checked{}, &SpecError{Reason: err.Error()}
	}
	switch {
	case s.Client == "" && len(s.ClientCmd) > 0:
		s.Client = runspec.ExecClient
	case s.Client == "":
		s.Client = sys.DefaultClient
	}
	clients, err := lookUpClients(s)
	if err != nil {
		return Checked{}, err
	}
	if len(s.ClientCmd) > 0 {
		if _, err := osexec.LookPath(s.ClientCmd[0]); err != nil {
			return Checked{}, specErrorf("--client-cmd: %s", quote.ShortenAll(err.Error()))
		}
	}
	nem, err := nemesis.New(s.Nemesis)
	if err != nil {
		return Checked{}, &SpecError{Reason: err.Error()}
	}
	nodes, err := sys.Check(s.Nodes)
	if err != nil {
		return Checked{}, &SpecError{Reason: err.Error()}
	}
	if err := nem.Available(sys, nodes); err != nil {
		return Checked{}, &SpecError{Reason: err.Error()}
	}
	onMachines, err := checkMachines(s, sys, nodes)
	if err != nil {
		return Checked{}, err
	}
	if err := nem.Fits(nemesis.Settings{Nodes: nodes, Extends: s.ExtendEvery != 0, Reach: reachOf(s)}); err != nil {
		return Checked{}, &SpecError{Reason: err.Error()}
	}
	if err := preflightLevers(s.Nemesis); err != nil {
		return Checked{}, &SpecError{Reason: err.Error()}
	}
	if err := checkCrashSettings(&s, sys, nodes, nem.Needs()); err != nil {
		return Checked{}, err
	}
	if err := checkPooler(s, sys); err != nil {
		return Checked{}, err
	}
	if s.Undirected && len(history.Targets(s.Nemesis)) == 0 {
		return Checked{}, specErrorf("--undirected applies to the nemeses that target a hazard (%s), not to %s",
			strings.Join(history.TargetingFaults(), ", "), nem.Name())
	}
	if err := checkSchedule(s); err != nil {
		return Checked{}, err
	}
	if s.Test == "" {
		s.Test = s.DerivedTest()
		if err := s.Validate(); err != nil { // a derived name must name a directory too
			return Checked{}, err
		}
	}
	return Checked{spec: s, sys: sys, clients: clients, nemesis: nem, nodes: nodes, machines: onMachines}, nil
}

// CheckedSpec is CheckSpec for a caller that needs only the spec as it runs: a suite
// checking its cells takes it as its suite.SpecCheck.
func CheckedSpec(s Spec) (Spec, error) {
	c, err := CheckSpec(s)
	return c.spec, err
}

func specErrorf(format string, args ...any) error {
	return &SpecError{Reason: fmt.Sprintf(format, args...)}
}

// systemFiles are the system files registered in this process: a system's name, the
// sha256 of the file that described it.
var systemFiles = struct {
	sync.Mutex
	hashes map[string]string
}{hashes: map[string]string{}}

// useSystemFile reads the spec's system file, when it names one, registers its system
// (once per process; another file describing a system of the same name is refused) and
// makes it the spec's: System becomes its name (a --system that names another built-in
// one is refused) and SystemFileSHA256 its hash. A saved spec whose file has changed
// since is refused, so a rerun tests what the run tested or says why not.
func useSystemFile(s *Spec) error {
	if s.SystemFile == "" {
		return nil
	}
	l, err := sysfile.Load(s.SystemFile)
	if err != nil {
		return &SpecError{Reason: quote.ShortenAll(err.Error())}
	}
	switch {
	case s.System != "" && s.System != l.System.Name && system.BuiltIn(s.System) && s.System != runspec.Default().System:
		return specErrorf("--system %s and --system-file %s (system %s): give one", quote.Short(s.System), s.SystemFile, l.System.Name)
	case s.SystemFileSHA256 != "" && s.SystemFileSHA256 != l.SHA256:
		return specErrorf("system file %s has changed since the run (sha256 %s, the run's %s)", s.SystemFile, l.SHA256[:12], shortHash(s.SystemFileSHA256))
	}
	systemFiles.Lock()
	defer systemFiles.Unlock()
	switch prev, ok := systemFiles.hashes[l.System.Name]; {
	case ok && prev != l.SHA256:
		return specErrorf("system file %s: system %s was already described by another file (sha256 %s)", s.SystemFile, quote.Short(l.System.Name), prev[:12])
	case !ok:
		if err := system.Register(l.System); err != nil {
			return specErrorf("system file %s: %s", s.SystemFile, quote.ShortenAll(err.Error()))
		}
		systemFiles.hashes[l.System.Name] = l.SHA256
	}
	s.System, s.SystemFileSHA256 = l.System.Name, l.SHA256
	return nil
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return quote.Short(h)
}

// defaultMinReplicasMaxLag is Redis's own min-replicas-max-lag.
const defaultMinReplicasMaxLag = 10 * time.Second

// checkCrashSettings refuses persistence, min-replicas and restart settings that mean
// nothing for the system or the nemesis, and fills in their defaults. Their bounds are
// spec.Spec.Validate's.
func checkCrashSettings(s *Spec, sys system.System, nodes int, needs nemesis.Needs) error {
	p, err := sys.Persistence(system.Persistence(s.Persistence))
	if err != nil {
		return specErrorf("%v", err)
	}
	s.Persistence = string(p)
	switch {
	case s.MinReplicas != 0 && !sys.Replicated:
		return specErrorf("--min-replicas-to-write needs a primary with replicas (%s), not %s",
			strings.Join(system.NamesWhere(func(s system.System) bool { return s.Replicated }), ", "), s.System)
	case s.MinReplicas > nodes-1:
		return specErrorf("--min-replicas-to-write must be between 0 and %d (the replicas of %d nodes), got %d", nodes-1, nodes, s.MinReplicas)
	case s.MinReplicas > 0 && s.MinReplicasMaxLag == 0:
		s.MinReplicasMaxLag = Duration(defaultMinReplicasMaxLag)
	}
	if s.Victims != "" && !needs.Restarts {
		return specErrorf("--victims applies to nemeses that crash nodes under a held lock (kill-node, power-loss)")
	}
	if (s.RestartAfter != 0 || s.RestartDelayTTL) && !needs.Restarts {
		return specErrorf("--restart-after and --restart-delay-ttl apply to nemeses that kill nodes (kill-node, failover)")
	}
	return nil
}

// checkPooler refuses a pooler the system does not offer.
func checkPooler(s Spec, sys system.System) error {
	if s.Pooler == "" {
		return nil
	}
	offers := system.NamesWhere(func(s system.System) bool { return s.Container != nil && s.Container.Pooler != nil })
	switch {
	case sys.Container == nil || sys.Container.Pooler == nil:
		return specErrorf("--pooler applies to %s, not %s, which has no pooler in front of it", strings.Join(offers, ", "), s.System)
	case !slices.Contains(sys.Container.Pooler.Modes, s.Pooler):
		return specErrorf("--pooler must be %s, got %s", strings.Join(sys.Container.Pooler.Modes, " or "), quote.Short(s.Pooler))
	}
	return nil
}

// checkSchedule refuses a written schedule beside a nemesis that cannot follow one: it
// would go on drawing its own faults.
func checkSchedule(s Spec) error {
	if len(s.Schedule) == 0 {
		return nil
	}
	for _, name := range s.Nemesis {
		if name != history.NoFaults && !slices.Contains(nemesis.Scripted(), name) {
			return specErrorf("--schedule: nemesis %s draws its own faults and follows no written schedule; those that do: %s",
				quote.Short(name), strings.Join(nemesis.Scripted(), ", "))
		}
	}
	for i, st := range s.Schedule {
		scripting, _ := nemesis.ScriptingOf(st.Fault)
		switch {
		case st.When != "" && !scripting.Clients:
			return specErrorf("--schedule: step %d waits for a client %s, but %s strikes no client of its choosing", i+1, st.When, st.Fault)
		case st.Until != "" && !scripting.HoldsOn:
			return specErrorf("--schedule: step %d lasts until a %s, but %s cannot hold on past its length", i+1, st.Until, st.Fault)
		}
	}
	return nil
}
