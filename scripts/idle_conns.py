#!/usr/bin/env python3
"""Memory a server spends on idle connections, as docs/benchmarks.md records it.

    scripts/idle_conns.py PID HOST:PORT [-n N] [--rounds R] [--settle S]

Opens N plain TCP connections to HOST:PORT that send nothing, waits S seconds,
reads RssAnon of process PID from /proc/PID/status, closes them all, waits
again and reads RssAnon once more; R rounds in a row (later rounds show
whether freed memory is reused). Prints one line per reading and the cost per
connection in bytes. Needs N + a few file descriptors; raises its own
RLIMIT_NOFILE soft limit up to the hard limit.
"""

import argparse
import resource
import socket
import time


def rss_anon_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise RuntimeError(f"no RssAnon in /proc/{pid}/status")


def open_idle(host, port, n):
    conns = []
    for i in range(n):
        s = socket.create_connection((host, port), timeout=5)
        conns.append(s)
    return conns


def alive(conns):
    """How many connections the server has not closed (a closed one reads EOF)."""
    n = 0
    for s in conns:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                continue
        except BlockingIOError:
            pass
        except OSError:
            continue
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pid", type=int)
    ap.add_argument("addr")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settle", type=float, default=3.0)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, a.n + 64) if hard != resource.RLIM_INFINITY else a.n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    base = rss_anon_kib(a.pid)
    print(f"before        RssAnon {base} kB")
    for r in range(1, a.rounds + 1):
        conns = open_idle(host, int(port), a.n)
        time.sleep(a.settle)
        opened = rss_anon_kib(a.pid)
        up = alive(conns)
        per = (opened - base) * 1024 / a.n
        print(f"round {r} open  RssAnon {opened} kB  (+{opened - base} kB, "
              f"{per:.0f} B per connection, {up}/{a.n} still open)")
        for s in conns:
            s.close()
        time.sleep(a.settle)
        closed = rss_anon_kib(a.pid)
        print(f"round {r} closed RssAnon {closed} kB  ({100.0 * (closed - base) / base:+.1f} % "
              f"of before)")


if __name__ == "__main__":
    main()
