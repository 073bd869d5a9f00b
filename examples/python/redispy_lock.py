#!/usr/bin/python3
"""redis-py's lock (redis.lock.Lock) as a lockbreaker lock client.

    bin/lockbreaker run --system redis --client exec --client-cmd examples/python/redispy_lock.py

It holds the lock as a Python service would: r.lock(key, timeout=ttl), acquire,
release, and extend(ttl, replace_ttl=True) when the run's holders extend. Each line it reads and writes is the protocol of docs/protocol.md. It
runs on a single Redis and, through redis-py's Sentinel support, on Sentinel.
redis-py's Lock (SET NX PX with a random token, released by a Lua script) hands
out no fencing token, so it refuses --fencing on.
"""
import json
import sys

import redis
from redis.exceptions import LockNotOwnedError, RedisError
from redis.sentinel import Sentinel


def answer(result, **fields):
    print(json.dumps(dict(result=result, **fields)), flush=True)


def address(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def connect(cfg):
    timeout = cfg["request_timeout"]
    if cfg["sentinels"]:
        sentinel = Sentinel([address(a) for a in cfg["sentinels"]], socket_timeout=timeout)
        return sentinel.master_for(cfg["sentinel_master"], socket_timeout=timeout)
    host, port = address(cfg["nodes"][0])
    return redis.Redis(host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout)


def main():
    cfg = json.loads(sys.stdin.readline())
    if cfg["fencing"]:
        answer("refused", message="redis-py's Lock hands out no fencing token")
        return
    lock = connect(cfg).lock(cfg["key"], timeout=cfg["ttl"], sleep=cfg["retry"])
    answer("ready", lease="key")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "acquire":
                # False: every attempt found the lock taken until the timeout.
                answer("granted" if lock.acquire(blocking_timeout=request["timeout"]) else "busy")
            elif request["op"] == "extend":
                lock.extend(cfg["ttl"], replace_ttl=True)
                answer("extended")
            else:
                lock.release()
                answer("released")
        except LockNotOwnedError as e:  # the lease ran out, or another client holds it
            answer("not-held", message=str(e))
        except RedisError as e:  # a timeout, a lost connection: it may or may not have happened
            answer("unknown", message=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
