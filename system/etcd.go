package system

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// etcd from Debian's etcd-server (3.4.23, the line Jepsen analysed in 2020): a Raft
// cluster started from a static initial cluster, each member keeping its write-ahead log
// and snapshots in its container, so a member killed and started again comes back with
// what it had synced (etcd syncs its log before it acknowledges a write).
const (
	etcdPort     = 2379
	etcdPeerPort = 2380
	etcdDataDir  = "/lockbreaker/etcd"
	// etcd's own defaults, which a team would run: a leader heartbeats every 100 ms and a
	// follower that hears nothing for a second calls an election.
	etcdHeartbeat       = 100 * time.Millisecond
	etcdElectionTimeout = time.Second
)

func init() {
	register(System{
		Name:          "etcd",
		About:         "an etcd cluster (Raft); the client library's lease-backed Mutex",
		Sizes:         Sizes{Default: 3, Min: 3, Max: 9, Odd: true},
		DefaultClient: "etcd",
		Leader:        true,
		// etcd is a Go program: it reads the time from the kernel's vDSO, never through
		// libc, where libfaketime hooks it. A faked clock would be recorded and change
		// nothing, so clock faults are refused rather than passed.
		FixedClock:   "etcd is a Go program, which reads the time without libc, where libfaketime moves it",
		Persistences: []Persistence{PersistFsync, PersistUnsafeNoFsync},
		Container: &Container{
			Port:      etcdPort,
			PeerPorts: []int{etcdPeerPort},
			Node:      etcdNode,
			Ready:     etcdHealthy,
			Role:      etcdRole,
			Data:      etcdDataDir,
			Image:     &Image{Packages: []string{"etcd-server"}},
			Notes:     etcdNotes,
		},
	})
}

// etcdNode runs member id of a static cluster of cluster.Nodes members, which find each
// other by their hosts (their names on the cluster network, or their machines). The initial-cluster flags matter only on the first
// start: a member started again on its data directory rejoins as what its log says.
func etcdNode(cluster Cluster, id int) NodeSetup {
	name := fmt.Sprintf("n%d", id)
	var members []string
	for i := 1; i <= cluster.Nodes; i++ {
		members = append(members, fmt.Sprintf("n%d=http://%s", i, net.JoinHostPort(cluster.Host(i), fmt.Sprint(etcdPeerPort))))
	}
	cmd := []string{
		"etcd", "--name", name, "--data-dir", etcdDataDir,
		"--listen-client-urls", fmt.Sprintf("http://0.0.0.0:%d", etcdPort),
		"--advertise-client-urls", "http://" + net.JoinHostPort(cluster.Host(id), fmt.Sprint(etcdPort)),
		"--listen-peer-urls", fmt.Sprintf("http://0.0.0.0:%d", etcdPeerPort),
		"--initial-advertise-peer-urls", "http://" + net.JoinHostPort(cluster.Host(id), fmt.Sprint(etcdPeerPort)),
		"--initial-cluster", strings.Join(members, ","),
		"--initial-cluster-state", "new", "--initial-cluster-token", "lockbreaker",
		"--heartbeat-interval", fmt.Sprint(etcdHeartbeat.Milliseconds()),
		"--election-timeout", fmt.Sprint(etcdElectionTimeout.Milliseconds()),
		"--logger", "zap", "--log-outputs", "stderr",
	}
	if cluster.Persistence == PersistUnsafeNoFsync {
		cmd = append(cmd, "--unsafe-no-fsync")
	}
	return NodeSetup{Cmd: cmd}
}

// EtcdLeaseTTL is the lease a client asks etcd for to stand for ttl: leases count whole
// seconds, so ttl rounded up, at least one.
func EtcdLeaseTTL(ttl time.Duration) int64 { return wholeSeconds(ttl) }

// wholeSeconds is d rounded up to whole seconds, at least one: for settings that count
// seconds.
func wholeSeconds(d time.Duration) int64 { return max(1, int64(math.Ceil(d.Seconds()))) }

// etcdMinLease is the shortest lease etcd grants: it raises any shorter one to one and a
// half election timeouts, rounded up to whole seconds, so that a lease cannot run out
// during an election.
func etcdMinLease() time.Duration {
	return time.Duration(math.Ceil((3 * etcdElectionTimeout / 2).Seconds())) * time.Second
}

// etcdNotes say what the lease became.
func etcdNotes(cluster Cluster) []string {
	asked := time.Duration(EtcdLeaseTTL(cluster.TTL)) * time.Second
	granted := max(asked, etcdMinLease())
	note := fmt.Sprintf("etcd leases count whole seconds and last at least %s (1.5 election timeouts of %s): "+
		"the clients ask for %s", etcdMinLease(), etcdElectionTimeout, asked)
	if granted != cluster.TTL {
		note += fmt.Sprintf(" and hold a %s lease where --ttl says %s; each grant records the lease the server gave (lease_ttl)", granted, cluster.TTL)
	}
	return []string{note}
}

// etcdHealthy succeeds when the member at addr has a leader and a quorum answers (its
// /health endpoint makes a quorum read).
func etcdHealthy(ctx context.Context, addr string) error {
	body, err := etcdHTTP(ctx, http.MethodGet, addr, "/health")
	if err != nil {
		return err
	}
	var health struct{ Health string }
	if err := json.Unmarshal(body, &health); err != nil || health.Health != "true" {
		return fmt.Errorf("/health answered %s", quote.Short(strings.TrimSpace(string(body))))
	}
	return nil
}

// etcdRole asks the member at addr for its status: it leads when the leader it names is
// itself.
func etcdRole(ctx context.Context, addr string) (Role, error) {
	body, err := etcdHTTP(ctx, http.MethodPost, addr, "/v3/maintenance/status")
	if err != nil {
		return "", err
	}
	var status struct {
		Header struct {
			MemberID string `json:"member_id"`
		}
		Leader string
	}
	if err := json.Unmarshal(body, &status); err != nil || status.Header.MemberID == "" {
		return "", fmt.Errorf("status answered %s", quote.Short(strings.TrimSpace(string(body))))
	}
	switch status.Leader {
	case "", "0":
		return "", fmt.Errorf("member %s knows no leader", status.Header.MemberID)
	case status.Header.MemberID:
		return Leader, nil
	}
	return Follower, nil
}

// etcdHTTP makes one request to the member's client port (its JSON gateway) within a
// second, as every probe must: a paused member must not hang it.
func etcdHTTP(ctx context.Context, method, addr, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, body)
	if err != nil {
		return nil, err
	}
	resp, err := probeHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %s %s", method, path, resp.Status, quote.Short(strings.TrimSpace(string(b))))
	}
	return b, err
}

// probeHTTP keeps no idle connections: a member restarted or cut off must be dialled
// afresh.
var probeHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
