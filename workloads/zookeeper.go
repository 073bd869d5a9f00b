package workloads

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// ZooKeeper's lock recipe: create an ephemeral sequential znode under /locks/<key>/;
// the lowest sequence number owns the lock; everyone else watches ONLY its immediate
// predecessor (no thundering herd) and looks again when it goes. The fencing token is the
// lock node's sequence number, which ZooKeeper takes from the parent's cversion and so
// only grows; the node's czxid is recorded too.
//
// The lease is the session: a client paused longer than the session timeout loses its
// ephemeral node, and with it the lock, without noticing until it wakes up.

func init() {
	register(Client{Name: "zookeeper", Systems: []string{"zookeeper"}, Lease: history.KeptBySession, Tokens: true, Queues: true, New: newZKRecipe})
}

type zkRecipe struct {
	cfg  Config
	conn *zk.Conn
	dir  string
	// node is the lock node this client created for the current acquisition.
	node     string
	acquires int
}

// dialZK connects with the lease as the session timeout. go-zookeeper's logging (session
// expiry, reconnects: what explains a lost lock) goes to stderr, the worker's log in the
// run's run.log, never to stdout, its event stream.
func dialZK(cfg Config) (*zk.Conn, error) {
	conn, _, err := zk.Connect(cfg.Nodes, cfg.TTL, zk.WithLogger(log.New(os.Stderr, "zookeeper: ", 0)))
	if err != nil {
		return nil, fmt.Errorf("connect zookeeper: %w", err)
	}
	return conn, nil
}

func newZKRecipe(cfg Config) (Lock, error) {
	conn, err := dialZK(cfg)
	if err != nil {
		return nil, err
	}
	return &zkRecipe{cfg: cfg, conn: conn, dir: "/locks/" + cfg.Key}, nil
}

// ensurePath creates every missing persistent node on the way to p.
func ensurePath(conn *zk.Conn, p string) error {
	at := ""
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		at += "/" + part
		if _, err := conn.Create(at, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", at, err)
		}
	}
	return nil
}

func (l *zkRecipe) Acquire(ctx context.Context) (Grant, error) {
	l.acquires++
	// The name carries a unique prefix so that after a connection loss during create we
	// can find out whether our node exists, and never leak it.
	prefix := fmt.Sprintf("%s-%d-lock-", l.cfg.Owner, l.acquires)
	if err := ensurePath(l.conn, l.dir); err != nil {
		return Grant{}, err
	}
	l.dropLeftovers()
	node, err := l.create(prefix)
	if err != nil {
		return Grant{}, err
	}
	l.node = node
	g, err := l.wait(ctx, node)
	if err != nil && !errors.Is(err, ErrBusy) {
		// Never leave a queued node behind: it would make us the owner later, unawares.
		l.conn.Delete(path.Join(l.dir, node), -1)
		l.node = ""
	}
	return g, err
}

// wait returns when node is the lowest in the queue, or gives up when ctx ends.
func (l *zkRecipe) wait(ctx context.Context, node string) (Grant, error) {
	watches := 0
	for {
		children, _, err := l.conn.Children(l.dir)
		if err != nil {
			return Grant{}, err
		}
		sortBySequence(children)
		mine := indexOf(children, node)
		if mine < 0 {
			// Our ephemeral node is gone: the session expired while we waited.
			return Grant{}, fmt.Errorf("lock node %s vanished while waiting (session expired?)", node)
		}
		if mine == 0 {
			return l.grant(node, watches)
		}
		predecessor := path.Join(l.dir, children[mine-1])
		exists, _, events, err := l.conn.ExistsW(predecessor)
		if err != nil {
			return Grant{}, err
		}
		if !exists {
			continue
		}
		select {
		case <-events:
			watches++
		case <-ctx.Done():
			return Grant{}, l.giveUp()
		}
	}
}

// create makes our ephemeral sequential node. If the connection broke during the create,
// the node may exist anyway: look for our prefix before trying again.
func (l *zkRecipe) create(prefix string) (string, error) {
	created, err := l.conn.Create(path.Join(l.dir, prefix), []byte(l.cfg.Owner), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err == nil {
		return path.Base(created), nil
	}
	children, _, lerr := l.conn.Children(l.dir)
	if lerr != nil {
		return "", fmt.Errorf("create lock node: %w (and listing failed: %v)", err, lerr)
	}
	for _, c := range children {
		if strings.HasPrefix(c, prefix) {
			return c, nil
		}
	}
	return "", fmt.Errorf("create lock node: %w", err)
}

// dropLeftovers deletes nodes an earlier acquisition of ours could not delete (its create
// or delete broke with the connection): queued in our live session, such a node would
// make us the owner later, unawares, and block everyone else.
func (l *zkRecipe) dropLeftovers() {
	children, _, err := l.conn.Children(l.dir)
	if err != nil {
		return
	}
	for _, c := range children {
		if strings.HasPrefix(c, l.cfg.Owner+"-") {
			l.conn.Delete(path.Join(l.dir, c), -1)
		}
	}
}

// giveUp deletes our node after waiting too long. If that fails the node may still be
// queued and could make us the owner later, so the acquire's outcome is unknown.
func (l *zkRecipe) giveUp() error {
	node := l.node
	l.node = ""
	if err := l.conn.Delete(path.Join(l.dir, node), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("gave up waiting but could not delete %s: %w", node, err)
	}
	return ErrBusy
}

func (l *zkRecipe) grant(node string, watches int) (Grant, error) {
	seq, err := sequence(node)
	if err != nil {
		return Grant{}, err
	}
	detail := map[string]string{"node": node, "session": strconv.FormatInt(l.conn.SessionID(), 16)}
	if _, stat, err := l.conn.Exists(path.Join(l.dir, node)); err == nil && stat != nil {
		detail["czxid"] = strconv.FormatInt(stat.Czxid, 10)
	}
	return Grant{Token: seq, HasToken: true, WatchEvents: history.Int(watches), Detail: detail}, nil
}

func (l *zkRecipe) Release(context.Context) error {
	node := l.node
	if node == "" {
		return ErrNotHeld
	}
	l.node = ""
	err := l.conn.Delete(path.Join(l.dir, node), -1)
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("%w: lock node %s is gone (session expired)", ErrNotHeld, node)
	}
	return err
}

func (l *zkRecipe) Close() error {
	l.conn.Close()
	return nil
}

// sequence is the 10-digit counter ZooKeeper appends to a sequential node's name.
func sequence(node string) (int64, error) {
	if len(node) < 10 {
		return 0, fmt.Errorf("%s is not a sequential node", quote.Short(node))
	}
	return strconv.ParseInt(node[len(node)-10:], 10, 64)
}

func sortBySequence(nodes []string) {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i][len(nodes[i])-10:] < nodes[j][len(nodes[j])-10:] })
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
