#!/usr/bin/python3
"""python-etcd3's lock (etcd3.Lock, Debian's python3-etcd3) as a lockbreaker lock client.

    bin/lockbreaker run --system etcd --client exec --client-cmd examples/python/etcd3_lock.py

It holds the lock as a Python service would: client.lock(name, ttl), acquire,
release, and refresh (a keep-alive of the lock's lease) when the run's holders extend. python-etcd3's Lock is a key under /locks/ put with a lease of ttl whole
seconds, only if the key does not exist (a transaction on its create revision);
it never refreshes the lease itself, so a holder that works past the TTL loses the
lock without a fault. Each line it reads and writes is the protocol of
docs/protocol.md. It talks to one endpoint, the first node, as python-etcd3's
client does.

Fencing token: the lock key's create revision. The library keeps no revision (its
source says "TODO: save the created revision"), so right after a grant this program
reads the key once and takes its create revision when the key still holds its own
value; etcd's revisions grow with every write, so a later holder's is higher. When
the key is no longer its own by then, the grant is unknown: the lease ran out first.

Debian's python3-etcd3 0.12 with Debian's python3-tenacity cannot wait for a busy
lock: acquire(timeout=...) raises TypeError from the wait callback it gives tenacity
(whose signature changed) the first time it finds the key taken. A team on Debian
polls instead, as this program does: acquire(timeout=0) tries once, then it waits
the run's retry pause and tries again, until the request's timeout.
"""
import json
import math
import sys
import time

import etcd3
import grpc
from etcd3 import exceptions


def answer(result, **fields):
    print(json.dumps(dict(result=result, **fields)), flush=True)


def acquire(lock, timeout, retry):
    """Tries lock once, then every retry seconds, until timeout: whether it was granted."""
    deadline = time.monotonic() + timeout
    while True:
        if lock.acquire(timeout=0):
            return True
        if time.monotonic() + retry > deadline:
            return False
        time.sleep(retry)


def main():
    cfg = json.loads(sys.stdin.readline())
    host, port = cfg["nodes"][0].rsplit(":", 1)
    client = etcd3.client(host=host, port=int(port), timeout=cfg["request_timeout"])
    lock = client.lock(cfg["key"], ttl=max(1, math.ceil(cfg["ttl"])))
    answer("ready", lease="session")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "acquire":
                if not acquire(lock, request["timeout"], cfg["retry"]):
                    answer("busy")
                    continue
                value, meta = client.get(lock.key)
                if value != lock.uuid:
                    answer("unknown", message="granted, but the key was no longer this client's when read back")
                    continue
                answer("granted", token=meta.create_revision, detail={"lease": str(lock.lease.id)})
            elif request["op"] == "extend":
                # A lease that ran out is gone with the key: etcd answers its keep-alive with TTL 0.
                renewed = lock.lease is not None and any(r.TTL > 0 for r in lock.refresh())
                if renewed:
                    answer("extended")
                else:
                    answer("not-held", message="the lock's lease had run out")
            elif lock.release():
                answer("released")
            else:
                answer("not-held", message="the key was not this client's any more: its lease had run out")
        except (exceptions.Etcd3Exception, grpc.RpcError) as e:  # a timeout, a lost connection: it may or may not have happened
            answer("unknown", message=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
