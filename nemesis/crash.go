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

// Crashes kill a node's server with SIGKILL, as a power cut or an OOM kill would, and
// start it again later on whatever its disk kept (--persistence). Unlike a pause, a crash
// loses what the server held only in memory: a Redis master without persistence comes back
// having forgotten every lock it granted (antirez's acknowledged weakness of Redlock), and
// a primary that crashes before replicating a key hands its role to a replica that never
// saw it (the seed's third failure mode).

// Restarter crashes a node's server and starts it again.
type Restarter interface {
	// Kill sends SIGKILL to the node's server and returns once it has gone.
	Kill(ctx context.Context, node string) error
	// Restart starts a killed node's server again and returns once it serves.
	Restart(ctx context.Context, node string) error
	// RestartKilled starts every node still killed again.
	RestartKilled(ctx context.Context) error
}

// Roles tells each node's part in its cluster now: leader or follower, primary or
// replica, down when killed, unknown when it does not say.
type Roles interface {
	Roles(ctx context.Context) (map[string]system.Role, error)
}

// killNode crashes a node on a seeded schedule and starts it again env.RestartAfter later.
// While a client holds the lock under a grant that names the nodes that granted it (a
// Redlock majority), the node is one of those not yet killed since the grant: each node of
// the holder's majority that comes back without the key brings a second client closer to
// a majority of its own, which one such node gives when the holder had a bare majority.
// Otherwise it is any node.
type killNode struct{}

func (killNode) Name() string { return "kill-node" }

func (killNode) Needs() Needs { return Needs{Restarts: true} }

func (k killNode) Available(sys system.System, _ int) error { return k.Needs().available(sys) }

func (killNode) Run(ctx context.Context, env Env) error {
	r, err := restarterOf(env)
	if err != nil {
		return err
	}
	nodes := env.Nodes.Names()
	w := watch(env.Subscribe())
	rng := rand.New(rand.NewSource(env.Seed))
	killed := map[string]int64{} // node -> when it was last killed
	for w.wait(ctx, scheduleWait(env, rng)) {
		candidates := w.holderNodes(killed)
		if len(candidates) == 0 {
			candidates = nodes
		}
		victim := candidates[rng.Intn(len(candidates))]
		killed[victim] = history.Now()
		if err := crash(ctx, env, r, victim); err != nil {
			return err
		}
	}
	return nil
}

// grantNodes is the grant detail naming the nodes that granted it ("n1,n2,n3").
const grantNodes = "nodes"

// crash kills node's server, records the crash with the role the node had, and starts it
// again env.RestartAfter later.
func crash(ctx context.Context, env Env, r Restarter, node string) (err error) {
	bg := context.WithoutCancel(ctx)
	detail := map[string]string{"restart-after": env.RestartAfter.String()}
	if role := roleOf(bg, env, node); role != "" {
		detail["role"] = string(role)
	}
	if err := r.Kill(bg, node); err != nil {
		return fmt.Errorf("kill node %s: %w", node, err)
	}
	recordDetail(env, history.Start, "kill-node", detail, node)
	defer func() {
		err = errors.Join(err, r.Restart(bg, node))
		record(env, history.Stop, "kill-node", node)
	}()
	stayDown(env, env.RestartAfter)
	return nil
}

// stayDown waits d, the rest of a killed node's time down, even when the run's time is up:
// a node back early, while the clients finish, would break what --restart-after (and
// --restart-delay-ttl) promise. Only an interrupt cuts it short.
func stayDown(env Env, d time.Duration) {
	select {
	case <-env.Halt:
	case <-time.After(d):
	}
}

func (killNode) Heal(ctx context.Context, env Env) error {
	r, err := restarterOf(env)
	if err != nil {
		return nil // nothing could have been killed
	}
	return r.RestartKilled(ctx)
}

// failover stages the seed's third failure mode on a replicated system (Sentinel): the
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

// rolePoll is how often a nemesis waiting for a role change asks the nodes.
const rolePoll = 100 * time.Millisecond

func (*failover) Name() string { return "failover" }

func (*failover) Needs() Needs { return Needs{Network: true, Restarts: true} }

func (f *failover) Available(sys system.System, _ int) error {
	if !sys.Replicated {
		return fmt.Errorf("crashes a primary before it replicates, and a %s cluster has no primary and replicas (try --system sentinel)", sys.Name)
	}
	return f.Needs().available(sys)
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
	recordDetail(env, history.Start, "failover", map[string]string{"primary": primary}, primary)
	return &replicationCut{primary: primary, at: history.Now(), err: err}
}

// failOver loses a grant with the cut-off primary and heals: the rest of the round.
func (c *replicationCut) failOver(ctx context.Context, env Env, net Network, r Restarter, roles Roles, w *watcher) (err error) {
	bg := context.WithoutCancel(ctx)
	detail := map[string]string{"primary": c.primary, "grant": "none"}
	var killed time.Time
	defer func() {
		err = errors.Join(err, net.HealNetwork(bg))
		if !killed.IsZero() {
			stayDown(env, env.RestartAfter-time.Since(killed))
			err = errors.Join(err, r.Restart(bg, c.primary))
		}
		recordDetail(env, history.Stop, "failover", detail, c.primary)
	}()
	if c.err != nil {
		return c.err
	}
	// A grant begun before the cut may have been replicated; with min-replicas, one begun
	// before the guard was on may have been accepted while the lag still allowed it.
	since := c.at
	if env.ReplicaLag > 0 {
		if !w.wait(ctx, env.ReplicaLag+replicaAckEvery) {
			return nil
		}
		since = history.Now()
	}
	if grant, ok := w.grantBegunAfter(ctx, since, max(env.Pause, env.TTL)); ok {
		detail["grant"] = workerName(grant.Process)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := r.Kill(bg, c.primary); err != nil {
		return fmt.Errorf("kill primary %s: %w", c.primary, err)
	}
	killed = time.Now()
	promoted, err := w.promotion(ctx, roles, c.primary)
	if promoted != "" {
		detail["primary"] = promoted
	}
	return err
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

func restarterOf(env Env) (Restarter, error) {
	r, ok := env.Nodes.(Restarter)
	if !ok {
		return nil, errors.New("this cluster cannot kill and restart its nodes")
	}
	return r, nil
}

func rolesOf(env Env) (Roles, error) {
	r, ok := env.Nodes.(Roles)
	if !ok {
		return nil, errors.New("this cluster cannot tell its nodes' roles")
	}
	return r, nil
}

// holderNodes are the nodes that granted the lock to its latest holder that has not begun
// to release, when the grant names them, less those killed since the grant.
func (w *watcher) holderNodes(killed map[string]int64) []string {
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
	return nodes
}

// wait follows the history for d; false when ctx ended first.
func (w *watcher) wait(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		if _, ok := w.next(ctx, timer.C); !ok {
			return ctx.Err() == nil
		}
	}
}

// grantBegunAfter waits up to within for a grant whose acquire began at or after t, unless
// the last grant already seen was one.
func (w *watcher) grantBegunAfter(ctx context.Context, t int64, within time.Duration) (history.Event, bool) {
	if w.last.Time != 0 && w.lastBegan >= t {
		return w.last, true
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		e, ok := w.next(ctx, timer.C)
		if !ok || e.Func == history.Acquire && e.Type == history.OK && w.lastBegan >= t {
			return e, ok
		}
	}
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

func (killNode) Hazard() history.Hazard  { return history.CrashUnderGrant }
func (*failover) Hazard() history.Hazard { return history.GrantLost }
