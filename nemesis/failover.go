package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/system"
)

// failover stages the failure of replication on a replicated system (Sentinel): the
// primary grants a lock and crashes before a replica has the key, and the replica promoted
// in its place grants the same lock again (and counts fencing tokens from where its copy
// stopped).
//
// Replication is cut first, both ways: uncut, a key reaches the replicas within a
// millisecond of the grant (measured here), so a crash after the grant loses nothing. The
// primary is killed right after the first grant whose acquire began after the cut (its key
// was written after it, so no replica has it), or after max(env.Pause, TTL) without one.
// With min-replicas-to-write the primary refuses writes once its replicas' acknowledgements
// are older than env.ReplicaLag: the nemesis gives that guard its chance first and only
// then looks for a grant to lose. It waits until the monitors have promoted a replica,
// heals the cut, and starts the old primary again env.RestartAfter after the crash; before
// the next round, which comes on the schedule, it waits until the cluster has one primary
// again. The first round's cut is made before the clients start (Arm), so that the run's
// first grant is the one lost instead of one a whole holding later.
//
// Its hazard is the lost grant made real (lost-grant-served): with the old primary down,
// the promoted replica answered another client (granted the lock again, or refused it as
// busy) while the lost grant was still held within its lease; the promotion under the held
// grant is counted on the way (grant-lost). A holder's work (100 ms by default) is over
// long before the monitors notice a crash, and their promotion, seen by their INFO every
// second, takes about as long as a lease, longer on a busy machine: so, directed (the
// default), the monitors are told to promote a replica (Promoter: SENTINEL FAILOVER) first,
// while the cut-off primary still serves, and the grant to lose is the first begun after
// that, made while every monitor still names the old primary (the clients dial whom they
// name, so it came from the old one); the primary is killed at once, and the holder is
// kept inside its critical section and within its lease (pause-in-lease) until another
// client has taken the lock over. Undirected, the primary is killed after the grant, the
// monitors find the crash themselves, and the holder goes on as it will.
type failover struct {
	// armed is the first round, cut before the clients started (nil when Arm cut nothing),
	// and w the watcher that has followed the history since Arm (nil without Arm).
	armed *replicationCut
	w     *watcher
}

// replicationCut is one round of the failover from the moment its primary was cut off.
type replicationCut struct {
	primary string
	at      int64 // when the cut was in place
	err     error // the cut's failure, reported by the round
}

// promotionTimeout bounds a wait for the monitors: to promote a replica (about 2 s here),
// or to agree on a single primary before the first round.
const promotionTimeout = 30 * time.Second

// replicaAckEvery is how often a Redis replica acknowledges what it has, which the
// primary's lag (whole seconds) counts from.
const replicaAckEvery = time.Second

// noReplicas begins a Redis primary's refusal of a write for want of replicas that
// acknowledged within min-replicas-max-lag.
const noReplicas = "NOREPLICAS"

// rolePoll is how often a nemesis waiting for a role change asks the nodes.
const rolePoll = 100 * time.Millisecond

func init() { register(func() kind { return &failover{} }) }

func (*failover) Kind() history.FaultKind { return history.Failover }

func (*failover) Needs() Needs { return Needs{Network: true, Restarts: true} }

func (*failover) suits(sys system.System, _ int) error {
	if !sys.Replicated {
		return fmt.Errorf("crashes a primary before it replicates, and a %s cluster has no primary and replicas (try --system sentinel)", sys.Name)
	}
	return nil
}

// Arm cuts the primary off its replicas before any client asks for the lock; Run's first
// round goes on from there.
func (f *failover) Arm(ctx context.Context, env Env) error {
	net, _, roles, err := failoverLevers(env)
	if err != nil {
		return err
	}
	f.w = watch(env.Subscribe())
	limit, cancel := context.WithTimeout(ctx, promotionTimeout)
	defer cancel()
	primary, ok := f.w.settled(limit, roles)
	switch {
	case ok:
		f.armed = cutOff(ctx, env, net, primary)
	case ctx.Err() == nil:
		return fmt.Errorf("the cluster had no single primary within %s", promotionTimeout)
	}
	return nil
}

func (f *failover) Run(ctx context.Context, env Env) error {
	net, r, roles, err := failoverLevers(env)
	if err != nil {
		return err
	}
	w := f.w
	if w == nil {
		w = watch(env.Subscribe())
	}
	rng := rand.New(rand.NewSource(env.Seed))
	round := f.armed
	for first := true; first || w.wait(ctx, scheduleWait(env, rng)); first = false {
		if round == nil {
			primary, ok := w.settled(ctx, roles)
			if !ok {
				return nil
			}
			round = cutOff(ctx, env, net, primary)
		}
		if err := round.failOver(ctx, env, net, r, roles, w); err != nil {
			return err
		}
		round = nil
	}
	return nil
}

// failoverLevers are the levers a failover pulls: the network, the servers' restarts and
// the roles.
func failoverLevers(env Env) (Network, Restarter, Roles, error) {
	net, err := networkOf(env)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := restarterOf(env)
	if err != nil {
		return nil, nil, nil, err
	}
	roles, err := rolesOf(env)
	return net, r, roles, err
}

// cutOff cuts primary off its replicas, both ways, and records the failover's start.
func cutOff(ctx context.Context, env Env, net Network, primary string) *replicationCut {
	replicas := slices.DeleteFunc(slices.Clone(env.Nodes.Names()), func(n string) bool { return n == primary })
	g := grudge{primary: replicas}
	for _, replica := range replicas {
		g[replica] = []string{primary}
	}
	err := cut(context.WithoutCancel(ctx), net, g)
	recordDetail(env, history.Start, history.Failover.Name, map[string]string{"primary": primary}, primary)
	return &replicationCut{primary: primary, at: history.Now(), err: err}
}

// failOver loses a grant with the cut-off primary and heals: the rest of the round.
func (c *replicationCut) failOver(ctx context.Context, env Env, net Network, r Restarter, roles Roles, w *watcher) (err error) {
	bg := context.WithoutCancel(ctx)
	detail := map[string]string{"primary": c.primary, "grant": "none"}
	var killed time.Time
	var served *served // the lost grant's watch, when one is held
	defer func() {
		err = errors.Join(err, net.HealNetwork(bg))
		if !killed.IsZero() {
			stayDown(env, env.RestartAfter-time.Since(killed))
			served.end("", history.Now()) // the old primary may answer again, and may remember
			err = errors.Join(err, r.Restart(bg, c.primary))
		}
		recordDetail(env, history.Stop, history.Failover.Name, detail, c.primary)
	}()
	if c.err != nil {
		return c.err
	}
	// A grant begun before the cut may have been replicated; with min-replicas, one begun
	// before the guard was on may have been accepted while the lag still allowed it.
	since := c.at
	within := max(env.Pause, env.TTL)
	if env.ReplicaLag > 0 {
		if !w.wait(ctx, env.ReplicaLag+replicaAckEvery) {
			return nil
		}
		// The primary counts its replicas' lag in whole seconds, once a second: its guard
		// is on once it has refused a write, however long that took on this machine.
		w.awaitRefused(ctx, within, noReplicas)
		since = history.Now()
	}
	var grant history.Event
	var promoting int64 // when the monitors were asked to promote a replica: 0 when they were not
	var granted bool
	if p, ok := env.Nodes.(Promoter); ok && !env.Undirected {
		// The clients are at work (an acquire since the cut) before the promotion begins, so
		// that one of them is granted by the old primary before the monitors name the new.
		w.awaitAcquire(ctx, since, within)
		promoting = history.Now()
		if err := p.Promote(bg); err != nil {
			return fmt.Errorf("promote a replica of %s: %w", c.primary, err)
		}
		var err error
		grant, granted, err = w.readerGrantedAfter(ctx, env, history.Now(), within, func() (bool, error) {
			// Once a monitor names the promoted replica, a client may have been granted by it.
			announced, err := p.Announced(bg)
			return announced == c.primary, err
		})
		if err != nil {
			return fmt.Errorf("ask the monitors for the primary: %w", err)
		}
	} else {
		grant, granted = w.grantBegunAfter(ctx, since, within)
	}
	// A victim that stopped itself and is not paused below goes on.
	defer func() { err = errors.Join(err, w.letGo(env, grant.Process)) }()
	if ctx.Err() != nil {
		return nil
	}
	if granted {
		detail["grant"] = history.TargetOfClient(grant.Process)
	}
	// The primary's crash and the promotion, and whether the grant was lost in them.
	failOver := func() error {
		if err := r.Kill(bg, c.primary); err != nil {
			return fmt.Errorf("kill primary %s: %w", c.primary, err)
		}
		killed = time.Now()
		// With the old primary down, the clients' definite answers come from the promoted
		// replica (a replica refuses writes), until the old primary is started again.
		served.begin("", history.Now())
		promoted, err := w.promotion(ctx, roles, c.primary)
		if promoted != "" {
			detail["primary"] = promoted
			if granted && w.holds(grant.Process) {
				recordHazard(env, history.Failover.Name, history.GrantLost, history.Now(),
					map[string]string{"grant": grantText(grant), "old primary": c.primary, "new primary": promoted},
					c.primary, promoted, history.TargetOfClient(grant.Process))
			}
		}
		return err
	}
	if granted && w.holds(grant.Process) {
		served = w.watchServed(env, history.Failover.Name, history.LostGrantServed, grant)
		served.grantsFrom = promoting
	}
	if !granted || env.Undirected || !w.holds(grant.Process) {
		return failOver()
	}
	var failErr error
	pauseErr := w.pauseInLease(ctx, env, grant.Process, func() bool {
		failErr = failOver()
		return failErr == nil
	})
	return errors.Join(failErr, pauseErr)
}

func (*failover) Heal(ctx context.Context, env Env) error {
	return errors.Join(partition{}.Heal(ctx, env), killNode{}.Heal(ctx, env))
}

// WatchRoles records the nodes' roles in the history (f roles) when it starts and whenever
// one changes, asking every `every` until ctx ends, so that the history shows which node
// led or was primary when. It records nothing for a cluster without roles.
func WatchRoles(ctx context.Context, env Env, every time.Duration) {
	r, err := rolesOf(env)
	if err != nil {
		return
	}
	var last map[string]system.Role
	for {
		roles, err := r.Roles(ctx)
		if err != nil || ctx.Err() != nil {
			return // no roles, or the answers were cut short
		}
		if !maps.Equal(roles, last) {
			var changed []string
			detail := map[string]string{}
			for _, node := range slices.Sorted(maps.Keys(roles)) {
				detail[node] = string(roles[node])
				if last[node] != roles[node] {
					changed = append(changed, node)
				}
			}
			env.Record(history.Event{Type: history.Info, Process: history.NemesisProcess, Func: history.Roles,
				Time: history.Now(), Targets: changed, Detail: detail})
			last = roles
		}
		sleep(ctx, every)
	}
}

// roleOf is node's role now, or "" when the cluster has no roles.
func roleOf(ctx context.Context, env Env, node string) system.Role {
	r, err := rolesOf(env)
	if err != nil {
		return ""
	}
	roles, err := r.Roles(ctx)
	if err != nil {
		return ""
	}
	return roles[node]
}

func rolesOf(env Env) (Roles, error) {
	r, ok := env.Nodes.(Roles)
	if !ok {
		return nil, errors.New("this cluster cannot tell its nodes' roles")
	}
	return r, nil
}

// holderNodes are the latest grant whose holder has not begun to release (zero: none) and
// the nodes that granted it, when the grant names them, less those killed since the grant.
func (w *watcher) holderNodes(killed map[string]int64) (history.Event, []string) {
	var latest history.Event
	for _, e := range w.holding {
		if e.Time > latest.Time || e.Time == latest.Time && e.Process < latest.Process {
			latest = e
		}
	}
	var nodes []string
	for _, n := range strings.Split(latest.Detail[grantNodes], ",") {
		if n != "" && killed[n] < latest.Time {
			nodes = append(nodes, n)
		}
	}
	return latest, nodes
}

// settled waits until exactly one node is primary and every other a replica, and returns
// the primary; false when ctx ended first. A primary killed and started again comes back as
// a second primary until the monitors turn it into a replica (8 s with Sentinel).
func (w *watcher) settled(ctx context.Context, r Roles) (string, bool) {
	for {
		roles, err := r.Roles(ctx)
		if primary := system.OnePrimary(roles); err == nil && primary != "" {
			return primary, true
		}
		if !w.wait(ctx, rolePoll) {
			return "", false
		}
	}
}

// promotion waits until a node other than old is primary and returns it.
func (w *watcher) promotion(ctx context.Context, r Roles, old string) (string, error) {
	deadline := time.Now().Add(promotionTimeout)
	for time.Now().Before(deadline) {
		roles, err := r.Roles(ctx)
		for _, node := range slices.Sorted(maps.Keys(roles)) {
			if err == nil && node != old && roles[node] == system.Primary {
				return node, nil
			}
		}
		if !w.wait(ctx, rolePoll) {
			return "", nil
		}
	}
	return "", fmt.Errorf("no replica was promoted within %s of the crash of primary %s", promotionTimeout, old)
}
