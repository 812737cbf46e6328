#!/usr/bin/env python3
"""Memory a broker spends per connection, as docs/benchmarks.md records it.

    scripts/conn_memory.py PID HOST:PORT [-n N] [--mode idle|produce|pull]
                           [--rounds R] [--settle S] [--active S]

Opens N TCP connections to the broker at HOST:PORT and reads RssAnon of
process PID from /proc/PID/status:

  idle     the connections send nothing;
  produce  each connection sends SEND_MESSAGE (1 KiB body) one after the
           other for --active seconds (a producer that waits for each ack),
           then goes quiet but stays open;
  pull     each connection sends one PULL_MESSAGE for an empty queue with
           long polling, so every connection holds a suspended pull.

Prints RssAnon before, while the connections are open (for produce: at the
end of the active phase and again after --settle seconds of quiet), and
after they all closed; R rounds in a row show whether freed memory is
reused. Raises its own RLIMIT_NOFILE soft limit up to the hard limit.
"""

import argparse
import json
import resource
import selectors
import socket
import struct
import time

SEND_MESSAGE = 10
PULL_MESSAGE = 11
TOPIC = "ConnMemory"


def rss_anon_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise RuntimeError(f"no RssAnon in /proc/{pid}/status")


def frame(code, opaque, ext, body=b""):
    """A request frame with a JSON header."""
    header = json.dumps({"code": code, "language": "JAVA", "version": 401,
                         "opaque": opaque, "flag": 0, "extFields": ext},
                        separators=(",", ":")).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def send_request(opaque, queue_id):
    ext = {"producerGroup": "conn-memory", "topic": TOPIC, "defaultTopic": "TBW102",
           "defaultTopicQueueNums": "8", "queueId": str(queue_id), "sysFlag": "0",
           "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
           "properties": "", "reconsumeTimes": "0", "unitMode": "false"}
    return frame(SEND_MESSAGE, opaque, ext, b"x" * 1024)


def pull_request(opaque, queue_id):
    ext = {"consumerGroup": "conn-memory", "topic": TOPIC, "queueId": str(queue_id),
           "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "6",
           "commitOffset": "0", "suspendTimeoutMillis": "30000",
           "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
    return frame(PULL_MESSAGE, opaque, ext)


def response_code(data):
    """The code of a response frame (without its length prefix)."""
    (word,) = struct.unpack(">i", data[:4])
    header_len = word & 0xFFFFFF
    return json.loads(data[4:4 + header_len]).get("code")


def open_conns(host, port, n):
    return [socket.create_connection((host, port), timeout=5) for _ in range(n)]


def alive(conns):
    """How many connections the server has not closed."""
    n = 0
    for s in conns:
        s.setblocking(False)
        try:
            if s.recv(1, socket.MSG_PEEK) == b"":
                continue
        except BlockingIOError:
            pass
        except OSError:
            continue
        n += 1
    return n


def drive_producers(conns, seconds):
    """Each connection sends, waits for the ack, sends again. Returns
    (acks, failures)."""
    sel = selectors.DefaultSelector()
    bufs = {}
    for i, s in enumerate(conns):
        s.setblocking(False)
        s.sendall(send_request(i, i % 8))
        sel.register(s, selectors.EVENT_READ, i)
        bufs[i] = b""
    acks = fails = 0
    opaque = len(conns)
    end = time.time() + seconds
    while time.time() < end:
        for key, _ in sel.select(timeout=0.5):
            s, i = key.fileobj, key.data
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("the broker closed a producer connection")
            bufs[i] += chunk
            while len(bufs[i]) >= 4:
                (length,) = struct.unpack(">i", bufs[i][:4])
                if len(bufs[i]) < 4 + length:
                    break
                code = response_code(bufs[i][4:4 + length])
                bufs[i] = bufs[i][4 + length:]
                if code == 0:
                    acks += 1
                else:
                    fails += 1
                if time.time() < end:
                    opaque += 1
                    s.setblocking(True)
                    s.sendall(send_request(opaque, i % 8))
                    s.setblocking(False)
    # Read what is still in flight so every connection ends quiet.
    deadline = time.time() + 5
    pending = {i for i in bufs}
    while pending and time.time() < deadline:
        for key, _ in sel.select(timeout=0.2):
            i = key.data
            try:
                chunk = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            bufs[i] += chunk
            if len(bufs[i]) >= 4 and len(bufs[i]) >= 4 + struct.unpack(">i", bufs[i][:4])[0]:
                pending.discard(i)
    sel.close()
    return acks, fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pid", type=int)
    ap.add_argument("addr")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--mode", choices=["idle", "produce", "pull"], default="idle")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--active", type=float, default=5.0)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.n + 64 if hard == resource.RLIM_INFINITY else min(hard, a.n + 64)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    if a.mode != "idle":
        # Create the topic and the consumer group with one request each, so
        # the first round does not pay for them.
        warm = open_conns(host, int(port), 1)
        drive_producers(warm, 0.5)
        warm[0].close()
        time.sleep(a.settle)

    base = rss_anon_kib(a.pid)
    print(f"mode {a.mode}, {a.n} connections")
    print(f"before            RssAnon {base} kB")
    for r in range(1, a.rounds + 1):
        conns = open_conns(host, int(port), a.n)
        if a.mode == "produce":
            acks, fails = drive_producers(conns, a.active)
            busy = rss_anon_kib(a.pid)
            print(f"round {r} active    RssAnon {busy} kB  (+{busy - base} kB, "
                  f"{(busy - base) * 1024 / a.n:.0f} B per connection; "
                  f"{acks / a.active:.0f} acks/s, {fails} failed)")
        elif a.mode == "pull":
            # Queues 1..7 are empty (the warm-up wrote to queue 0 only).
            for i, s in enumerate(conns):
                s.sendall(pull_request(i, 1 + i % 7))
        time.sleep(a.settle)
        opened = rss_anon_kib(a.pid)
        label = {"idle": "idle", "produce": "quiet", "pull": "pulling"}[a.mode]
        print(f"round {r} {label:<9} RssAnon {opened} kB  (+{opened - base} kB, "
              f"{(opened - base) * 1024 / a.n:.0f} B per connection, "
              f"{alive(conns)}/{a.n} open)")
        for s in conns:
            s.close()
        time.sleep(a.settle)
        closed = rss_anon_kib(a.pid)
        print(f"round {r} closed    RssAnon {closed} kB  "
              f"({100.0 * (closed - base) / base:+.1f} % of before)")


if __name__ == "__main__":
    main()
