#!/usr/bin/python3
"""kazoo's lock (kazoo.recipe.lock.Lock) as a lockbreaker lock client.

    bin/lockbreaker run --system zookeeper --client exec --client-cmd examples/python/kazoo_lock.py

It holds the lock as a Python service would: zk.Lock(path, identifier), acquire,
release, and a state listener that hears when the session is lost, as kazoo's
documentation advises. Each line it reads and writes is the protocol of
docs/protocol.md. The ZooKeeper session is the lease: its timeout is the TTL.

Beside another library's clients on the same lock path (lockbreaker run --client
zk-recipe-lib,exec ...), kazoo sees only nodes with its own __lock__ in their names
and ignores the others' (go-zookeeper's "-lock-"): two holders with no fault at all
(docs/known-bugs.md). --extra-lock-pattern=P, once or more, hands kazoo the other
names to wait behind (Lock's extra_lock_patterns, kazoo PR #599).

Fencing token: the sequence number ZooKeeper appended to the lock's node name.
kazoo keeps that name in lock.node (e.g. 3f2a...__lock__0000000042), which is not
in its documentation but is a plain attribute; a later holder's node was created
later, so its number is higher.
"""
import json
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout


def answer(result, **fields):
    print(json.dumps(dict(result=result, **fields)), flush=True)


def main():
    cfg = json.loads(sys.stdin.readline())
    zk = KazooClient(hosts=",".join(cfg["nodes"]), timeout=cfg["ttl"])
    lost = threading.Event()

    def on_state(state):
        if state == KazooState.LOST:
            lost.set()
            print(f"session lost at {time.monotonic():.6f}", file=sys.stderr, flush=True)

    zk.add_listener(on_state)
    zk.start(timeout=5)
    extra = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--extra-lock-pattern=")]
    lock = zk.Lock(f"/locks/{cfg['key']}", cfg["owner"], extra_lock_patterns=extra)
    answer("ready", lease="session")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "acquire":
                lost.clear()
                if lock.acquire(timeout=request["timeout"]):
                    token = int(lock.node.rsplit("__lock__", 1)[1])
                    answer("granted", token=token, detail={"node": lock.node})
                else:
                    answer("busy")
            elif lost.is_set():
                lock.release()  # kazoo forgets the node ZooKeeper deleted with the session
                answer("not-held", message="the session was lost while holding the lock")
            else:
                lock.release()
                answer("released")
        except LockTimeout:  # waited in line until the timeout
            answer("busy")
        except KazooException as e:  # a lost connection or session: it may or may not have happened
            answer("unknown", message=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
