import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

/**
 * Apache Curator's lock as a lockbreaker lock client (docs/protocol.md): JSON lines on
 * stdin and stdout, the ZooKeeper ensemble of the run, Debian's Curator 5.4.
 *
 * <pre>
 *     bin/lockbreaker run --system zookeeper --client exec --client-cmd examples/java/curator_lock
 *     bin/lockbreaker run --system zookeeper --client exec --client-cmd 'examples/java/curator_lock semaphore'
 *     bin/lockbreaker run --system zookeeper --client exec --client-cmd 'examples/java/curator_lock leader-latch' --nemesis outage
 * </pre>
 *
 * <p>It holds the lock as a Java service would: one CuratorFramework with the session timeout
 * of the run's TTL (the lease) and an ExponentialBackoffRetry, a ConnectionStateListener
 * that hears of LOST as Curator's documentation (Tech Note 12) tells users to, and
 * {@code InterProcessMutex.acquire(time, unit)} and {@code release()}. With the argument
 * {@code semaphore} it takes {@code InterProcessSemaphoreV2} with one lease instead, which
 * is what {@code InterProcessSemaphoreMutex} wraps (that class keeps its lease private, so
 * no token could be read from it).
 *
 * <p>With {@code leader-latch}, leadership is the lock, as a service that elects its leader
 * with {@code LeaderLatch} holds it: a client stands for leadership with a latch of its own
 * and stays in line until it leads (an acquire that times out answers busy and keeps its
 * place), holds the lock while it leads, and gives it up by closing the latch; an extend
 * asks {@code hasLeadership()}, as a leader checks before it acts. Curator 5.4's latch
 * leads, after its session was lost, on the node that session owned while the server still
 * keeps it (CURATOR-696, fixed in 5.7.0). {@code leader-latch-owner-check} is the control:
 * the same latch, which before it says it leads checks, as 5.7.0's does, that its node
 * belongs to its own session, and otherwise gives that node up and stands again with a new
 * one (5.7.0's reset). 5.7.0 itself is not in Debian.
 *
 * <p>Release answers {@code not-held} only when Curator said LOST between the grant and the
 * end of {@code release()}: Curator's own {@code release()} deletes the lock node and
 * ignores that it is already gone (the session that owned it expired), so it never tells.
 *
 * <p>Fencing token: the sequence number ZooKeeper appended to the lock node Curator created
 * ({@code _c_<uuid>-lock-0000000042}). InterProcessMutex keeps that path behind its
 * protected {@code getLockPath()}, which a subclass may call; a lease names its node
 * ({@code Lease.getNodeName()}). A later holder's node was created later under the same
 * parent, so its number is higher, as long as the parent lives: Curator creates it as a
 * container node, which the server deletes once it has been empty for a while, and the
 * numbers of a new parent start again from 0.
 */
public final class CuratorLock {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    /** The mutex with its lock node's path in reach: getLockPath() is protected. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String node() {
            return getLockPath();
        }
    }

    /**
     * One of the locks: acquire gives the lock node's path or null, release gives it up, held
     * says whether the lock still says it is held (only a leader latch knows; the others
     * always say so).
     */
    interface Lock {
        String acquire(long millis) throws Exception;

        void release() throws Exception;

        default boolean held() {
            return true;
        }
    }

    /**
     * Leadership as the lock: one latch stands for leadership until it leads, then holds it
     * until release closes it; the next acquire stands again with a new latch.
     */
    static final class Latch implements Lock {
        private final CuratorFramework client;
        private final String path;
        private final boolean ownerCheck;
        private LeaderLatch latch; // standing or leading; null after a release

        Latch(CuratorFramework client, String path, boolean ownerCheck) {
            this.client = client;
            this.path = path;
            this.ownerCheck = ownerCheck;
        }

        public String acquire(long millis) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
            if (latch == null) {
                latch = started();
            }
            while (latch.await(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                String node = latch.getOurPath();
                if (!ownerCheck || ownsNode(node)) {
                    return node;
                }
                // 5.7.0's reset: the node is an earlier session's, so this latch does not lead;
                // it deletes that node and stands again with a new one.
                latch.close();
                latch = started();
            }
            return null; // not leading yet: the latch keeps its place in line
        }

        /** As 5.7.0's checkLeadership asks: does the node belong to this client's session now? */
        private boolean ownsNode(String node) throws Exception {
            Stat stat = client.checkExists().forPath(node);
            return stat != null && stat.getEphemeralOwner() == client.getZookeeperClient().getZooKeeper().getSessionId();
        }

        private LeaderLatch started() throws Exception {
            LeaderLatch l = new LeaderLatch(client, path);
            l.start();
            return l;
        }

        public void release() throws Exception {
            LeaderLatch l = latch;
            latch = null;
            if (l != null) { // null: no acquire stood since the last release
                l.close();
            }
        }

        public boolean held() {
            return latch != null && latch.hasLeadership();
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "mutex";
        if (!List.of("mutex", "semaphore", "leader-latch", "leader-latch-owner-check").contains(mode)) {
            System.err.println("usage: curator_lock [mutex|semaphore|leader-latch|leader-latch-owner-check]");
            System.exit(2);
        }
        boolean latch = mode.startsWith("leader-latch");
        // Touch Curator before reading anything: a missing jar says so now, not mid-run.
        try {
            CuratorFrameworkFactory.builder();
            InterProcessMutex.class.getName();
        } catch (LinkageError e) {
            System.err.println("curator_lock: cannot load Curator (" + e
                    + "): install libcurator-recipes-java, libcurator-framework-java, libcurator-client-java and libzookeeper-java (make deps)");
            System.exit(1);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null) {
            return;
        }
        JsonNode cfg = JSON.readTree(first);
        if (!cfg.path("system").asText().equals("zookeeper")) {
            answer(result("refused").put("message", "Curator's locks run on ZooKeeper, not on " + cfg.path("system").asText()));
            return;
        }
        if (cfg.path("extend").asBoolean() && !latch) {
            answer(result("refused").put("message", "Curator's " + mode + " has no lease to extend: its session is kept alive for it"));
            return;
        }
        List<String> nodes = new ArrayList<>();
        cfg.path("nodes").forEach(n -> nodes.add(n.asText()));
        int sessionMs = (int) Math.round(cfg.path("ttl").asDouble() * 1000);
        // A short session wants a connection timeout within it (Curator warns otherwise), and
        // the retries a user would write: a few, backing off from 100 ms.
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(String.join(",", nodes))
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(Math.max(sessionMs / 2, 100))
                .retryPolicy(new ExponentialBackoffRetry(100, 3))
                .build();
        AtomicBoolean lost = new AtomicBoolean();
        client.getConnectionStateListenable().addListener((c, state) -> {
            if (state == ConnectionState.LOST) {
                lost.set(true);
            }
            System.err.printf("connection %s at %.6f%n", state, now());
        });
        client.start();

        String path = "/locks/" + cfg.path("key").asText();
        Lock lock = switch (mode) {
            case "mutex" -> mutex(client, path);
            case "semaphore" -> semaphore(client, path);
            default -> new Latch(client, path, mode.equals("leader-latch-owner-check"));
        };
        answer(result("ready").put("lease", "session"));

        String line;
        while ((line = in.readLine()) != null) {
            JsonNode request = JSON.readTree(line);
            long timeoutMs = Math.round(request.path("timeout").asDouble() * 1000);
            try {
                String op = request.path("op").asText();
                if (op.equals("extend")) {
                    answer(result(lock.held() ? "extended" : "not-held"));
                } else if (op.equals("acquire")) {
                    double started = now();
                    String node = lock.acquire(timeoutMs);
                    if (node == null) { // waited in line until the timeout, and left it
                        answer(result("busy"));
                        continue;
                    }
                    lost.set(false); // a LOST before the grant was of a session before it
                    ObjectNode a = result("granted").put("token", sequence(node)).put("attempt_started", started);
                    a.putObject("detail").put("node", node);
                    answer(a);
                } else {
                    boolean held = lock.held();
                    lock.release();
                    // Read after release(), which may itself wait out the reconnection in
                    // which Curator finds the session gone (and says LOST meanwhile).
                    if (!held) {
                        answer(result("not-held").put("message", "the latch no longer led"));
                    } else if (lost.get()) {
                        answer(result("not-held").put("message", "Curator said LOST while the lock was held"));
                    } else {
                        answer(result("released"));
                    }
                }
            } catch (Exception e) { // a lost connection or session: it may or may not have happened
                answer(result("unknown").put("message", e.getClass().getSimpleName() + ": " + e.getMessage()));
            }
        }
        client.close();
    }

    static Lock mutex(CuratorFramework client, String path) {
        Mutex m = new Mutex(client, path);
        return new Lock() {
            public String acquire(long millis) throws Exception {
                return m.acquire(millis, TimeUnit.MILLISECONDS) ? m.node() : null;
            }

            public void release() throws Exception {
                m.release();
            }
        };
    }

    static Lock semaphore(CuratorFramework client, String path) {
        InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(client, path, 1);
        return new Lock() {
            Lease lease;

            public String acquire(long millis) throws Exception {
                lease = s.acquire(millis, TimeUnit.MILLISECONDS);
                return lease == null ? null : path + "/leases/" + lease.getNodeName();
            }

            public void release() throws Exception {
                Lease l = lease;
                lease = null;
                l.close(); // as InterProcessSemaphoreMutex.release() does (returnLease would hide an error)
            }
        };
    }

    /** The sequence number ZooKeeper appended to a sequential node's name: its last ten digits. */
    static long sequence(String node) {
        return Long.parseLong(node.substring(node.length() - 10));
    }

    /** Seconds on CLOCK_MONOTONIC, which System.nanoTime reads on Linux. */
    static double now() {
        return System.nanoTime() / 1e9;
    }

    static ObjectNode result(String result) {
        return JSON.createObjectNode().put("result", result);
    }

    static void answer(ObjectNode a) {
        OUT.print(a.toString() + "\n");
        OUT.flush();
    }
}
