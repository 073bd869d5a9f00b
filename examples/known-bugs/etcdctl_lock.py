#!/usr/bin/python3
"""etcd 3.4's own lock, as etcdctl 3.4 holds it (Debian's etcd-client), as a lockbreaker lock client.

    bin/lockbreaker run --system etcd --client exec --client-cmd examples/known-bugs/etcdctl_lock.py --nemesis pause-waiter

`etcdctl lock NAME COMMAND` takes the lock with the 3.4 client's concurrency.Mutex
(a key under NAME with the session's lease; the key with the lowest create revision
owns it, each waiter waits for the keys created before its own to go), runs COMMAND
while it holds it, and releases it when COMMAND ends. Here COMMAND is this program
again, as `held`: it tells the waiting program that the lock is granted, with the
lock key and revision etcdctl gives it (ETCD_LOCK_KEY, ETCD_LOCK_REV) and its own
process id, and holds until the program sends it SIGTERM, which is the release
(etcdctl gives COMMAND no stdin to hold on). A team runs a job under a lock in
exactly this way.

The 3.4 Mutex has the bug Jepsen's etcd 3.4.3 analysis found (etcd#11456): a waiter
that was stopped past its lease lost its key with the lease, yet when it goes on it
only waits for the keys before its own to go, and is told it holds the lock while
another client does. etcd 3.5's Mutex reads its own key back first and answers
ErrSessionExpired. etcdctl runs COMMAND right after Lock returns, before anything
looks at the key.

Fencing token: the revision etcd answered the grant at (ETCD_LOCK_REV), which grows
from grant to grant while the lock works; a waiter granted by the bug gets a higher
one than the holder it overlaps, so fencing does not save its write.

Time counts only while this program runs: a pause by the nemesis stops its clock
too, as the harness counts a request's bound (docs/protocol.md).
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time


def answer(result, **fields):
    print(json.dumps(dict(result=result, **fields)), flush=True)


def held():
    """Run by etcdctl while it holds the lock: say so, then hold until SIGTERM."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"granted {os.environ['ETCD_LOCK_KEY']} {os.environ['ETCD_LOCK_REV']} {os.getpid()}", flush=True)
    while True:
        signal.pause()


class RunningClock:
    """Seconds this program has run: a gap of more than a step between two looks is a
    stop (SIGSTOP), not counted."""

    STEP = 0.05

    def __init__(self):
        self.last, self.spent = time.monotonic(), 0.0

    def tick(self):
        now = time.monotonic()
        self.spent += min(now - self.last, 2 * self.STEP)
        self.last = now
        return self.spent


class Lock:
    def __init__(self, cfg):
        self.cfg = cfg
        self.proc = None
        self.holder = None  # the process id of the command etcdctl runs while it holds the lock

    def acquire(self, timeout):
        """granted, with the key and revision etcdctl held it under; busy; or unknown."""
        ttl = max(1, int(-(-self.cfg["ttl"] // 1)))  # whole seconds, as etcd counts
        self.proc = subprocess.Popen(
            ["etcdctl", "--endpoints=" + ",".join(self.cfg["nodes"]),
             f"--dial-timeout={self.cfg['request_timeout']}s", f"--command-timeout={self.cfg['request_timeout']}s",
             "lock", f"--ttl={ttl}", "/locks/" + self.cfg["key"], os.path.abspath(__file__), "held"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=sys.stderr, env=dict(os.environ, ETCDCTL_API="3"))
        clock = RunningClock()
        while clock.tick() < timeout:
            ready, _, _ = select.select([self.proc.stdout], [], [], RunningClock.STEP)
            if ready:
                return self.granted()
        return self.give_up()

    def granted(self):
        line = self.proc.stdout.readline().decode().split()
        if len(line) == 4 and line[0] == "granted":
            self.holder = int(line[3])
            answer("granted", token=int(line[2]), detail={"key": line[1]})
            return
        code = self.proc.wait()  # etcdctl ended without the lock: its error is on stderr
        self.proc = None
        answer("unknown", message=f"etcdctl lock ended with exit status {code} before the lock was granted")

    def give_up(self):
        """Stops waiting: etcdctl, interrupted, ends. Whether its key was ever put it does not
        say (the lease takes a key left behind away), so the acquire's outcome is unknown."""
        self.proc.send_signal(signal.SIGINT)
        line = self.proc.stdout.readline().decode().split() if select.select([self.proc.stdout], [], [], 1)[0] else []
        if len(line) == 4 and line[0] == "granted":
            os.kill(int(line[3]), signal.SIGTERM)  # granted as it gave up: released at once
        self.end(5)
        answer("unknown", message="gave up waiting before the lock was granted")

    def end(self, timeout):
        """Waits for etcdctl to end, at most timeout seconds, then kills it (its lease then
        takes its key away); its exit status, or None when it was killed."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        self.proc, self.holder = None, None
        return code

    def release(self, timeout):
        if self.proc is None:
            answer("not-held", message="no lock held")
            return
        os.kill(self.holder, signal.SIGTERM)
        code = self.end(timeout)
        if code == 0:
            answer("released")
        else:
            answer("unknown", message=f"etcdctl lock did not end well on release (exit status {code}; None: killed after {timeout}s)")


def main():
    if shutil.which("etcdctl") is None:
        sys.exit("etcdctl_lock.py needs etcdctl 3.4 on PATH (Debian's etcd-client; make deps installs it)")
    cfg = json.loads(sys.stdin.readline())
    lock = Lock(cfg)
    answer("ready", lease="session")
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "acquire":
            lock.acquire(request["timeout"])
        else:
            lock.release(request["timeout"])
    if lock.holder is not None:  # the run stopped it holding the lock: give it up
        os.kill(lock.holder, signal.SIGTERM)
        lock.end(5)


if __name__ == "__main__":
    if sys.argv[1:] == ["held"]:
        held()
    else:
        main()
