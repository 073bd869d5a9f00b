#!/usr/bin/python3
"""The exec client of the example lease server (leased), speaking docs/protocol.md.

    bin/lockbreaker run --system-file examples/own-service/lease.yaml \
        --client-cmd examples/own-service/lease/lease_client.py --nemesis pause-holder --fencing on

One connection to the one node; ACQUIRE until granted or the request's timeout, each
grant's token the server's counter, RELEASE with the token it was granted. A timeout or
a lost connection is an unknown outcome (the connection is then dropped and made again).
Standard library only.
"""
import json
import socket
import sys
import time


def answer(result, **fields):
    print(json.dumps(dict(result=result, **fields)), flush=True)


class Node:
    def __init__(self, addr, timeout):
        host, port = addr.rsplit(":", 1)
        self.addr, self.timeout, self.conn = (host, int(port)), timeout, None

    def ask(self, line):
        """One request, one answer line; an OSError means nobody knows what happened."""
        try:
            if self.conn is None:
                self.conn = socket.create_connection(self.addr, timeout=self.timeout)
                self.reader = self.conn.makefile("r")
            self.conn.sendall((line + "\n").encode())
            reply = self.reader.readline()
            if not reply:
                raise OSError("the server closed the connection")
            return reply.strip()
        except OSError:
            self.close()
            raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def main():
    cfg = json.loads(sys.stdin.readline())
    node = Node(cfg["nodes"][0], cfg["request_timeout"])
    key, owner, ttl_ms = cfg["key"], cfg["owner"], max(1, int(cfg["ttl"] * 1000))
    token = None
    answer("ready", lease="key")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "acquire":
                deadline = time.monotonic() + request["timeout"]
                while True:
                    started = time.monotonic()
                    reply = node.ask(f"ACQUIRE {key} {owner} {ttl_ms}")
                    if reply.startswith("GRANTED "):
                        token = int(reply.split()[1])
                        answer("granted", token=token, attempt_started=started)
                        break
                    if reply != "BUSY":
                        answer("unknown", message=f"the server answered {reply!r}")
                        break
                    if time.monotonic() + cfg["retry"] >= deadline:
                        answer("busy")
                        break
                    time.sleep(cfg["retry"])
            else:
                reply = node.ask(f"RELEASE {key} {owner} {token}")
                if reply == "RELEASED":
                    answer("released")
                elif reply == "NOTHELD":
                    answer("not-held", message="the lease had run out or was another's")
                else:
                    answer("unknown", message=f"the server answered {reply!r}")
        except OSError as e:
            answer("unknown", message=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
