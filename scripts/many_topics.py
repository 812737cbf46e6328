#!/usr/bin/env python3
"""Start-up and memory of a broker holding many topics (issue 16), as
docs/benchmarks.md records it.

    scripts/many_topics.py BASALT_BINARY -n TOPICS [--queues Q] [--conns C]
                           [--data DIR] [--keep]

Starts `BASALT_BINARY standalone` on free loopback ports over an empty data
directory (a temporary one unless --data), then:

  1. creates TOPICS topics of Q queues by sending one 100-byte SEND_MESSAGE
     to each (auto-creation through TBW102, queue i % Q), over C connections;
  2. stops the broker cleanly (SIGTERM) and starts it again;
  3. kills it (SIGKILL) and starts it again;
  4. after each start, pulls the message of a sample of topics back.
  5. after the last start, times GET_ROUTEINFO_BY_TOPIC on the NameServer
     (one connection, a sample of topics) and sums the REGISTER_BROKER body
     bytes the broker logged for its full registration at that start (one
     periodic registration's worth; several requests with
     enableSplitRegistration).

--set KEY=VALUE (repeatable) passes broker settings, e.g.
`--set compressedRegister=true --set enableSplitRegistration=true`.
In standalone mode NameServer and broker are one process: its RSS is both.

For each start it prints the time from spawn to the ready line, the growth of
the system's page cache (`Cached` in /proc/meminfo, which other processes on
the machine also move) across the start, and the broker's VmRSS, RssAnon and
RssFile right after the ready line; for the creation phase, the time and the
RssAnon growth per created topic; and the ConsumeQueues' size on disk. Each
start and the creation phase carry the 1-minute load average at their end
(the machine may be shared with other work).
Raises its own RLIMIT_NOFILE soft limit to the hard limit.
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SEND_MESSAGE = 10
PULL_MESSAGE = 11
GET_ROUTEINFO_BY_TOPIC = 105
REGISTER_BODY = "REGISTER_BROKER body"
READY = "basalt standalone ready"


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def cached_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Cached:"):
                return int(line.split()[1])
    raise RuntimeError("no Cached in /proc/meminfo")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def frame(code, opaque, ext, body=b""):
    header = json.dumps({"code": code, "language": "JAVA", "version": 401,
                         "opaque": opaque, "flag": 0, "extFields": ext},
                        separators=(",", ":")).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def read_frame(sock):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("broker closed the connection")
            buf += chunk
        return buf
    (length,) = struct.unpack(">i", exact(4))
    data = exact(length)
    (hlen,) = struct.unpack(">i", data[:4])
    header = json.loads(data[4:4 + (hlen & 0xFFFFFF)])
    return header, data[4 + (hlen & 0xFFFFFF):]


def call(sock, code, opaque, ext, body=b""):
    sock.sendall(frame(code, opaque, ext, body))
    header, body = read_frame(sock)
    return header, body


def topic(i):
    return f"ManyTopics{i}"


def send_ext(t, queue_id, queues):
    return {"producerGroup": "many-topics", "topic": t, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": str(queues), "queueId": str(queue_id),
            "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)),
            "flag": "0", "properties": "", "reconsumeTimes": "0",
            "unitMode": "false"}


def pull_ext(t, queue_id):
    return {"consumerGroup": "many-topics", "topic": t, "queueId": str(queue_id),
            "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "4",
            "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": "*", "subVersion": "0", "expressionType": "TAG"}


def body_of(i):
    return (f"m{i}-".encode() * 20)[:100]


class Broker:
    def __init__(self, binary, data, sets):
        self.binary, self.data, self.sets = binary, data, sets
        self.namesrv_port, self.port = free_port(), free_port()
        self.proc = None
        self.log = open(os.path.join(os.path.dirname(data), "broker.log"), "ab")

    def start(self):
        cmd = [self.binary, "standalone", "--data", self.data,
               "--namesrv-port", str(self.namesrv_port), "--port", str(self.port),
               "--listen", "127.0.0.1", "--advertise", "127.0.0.1"]
        for s in self.sets:
            cmd += ["--set", s]
        cache_before = cached_kib()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=dict(os.environ, BASALT_LOG="info,basalt_broker::registration=debug"))
        self.register_bytes, self.register_requests = 0, 0
        for line in self.proc.stdout:
            self.log.write(line)
            text = line.decode(errors="replace")
            if REGISTER_BODY in text:
                m = re.search(r"bytes=(\d+)", text)
                self.register_bytes += int(m.group(1)) if m else 0
                self.register_requests += 1
            if READY in text:
                break
        else:
            raise RuntimeError("broker exited before it was ready")
        elapsed = time.monotonic() - t0
        threading.Thread(target=self._drain, daemon=True).start()
        pid = self.proc.pid
        return {"start_s": elapsed,
                "register_body_bytes": self.register_bytes,
                "register_requests": self.register_requests,
                "loadavg_1m": os.getloadavg()[0],
                "cache_growth_mib": (cached_kib() - cache_before) / 1024,
                "vmrss_mib": status_kib(pid, "VmRSS") / 1024,
                "rss_anon_mib": status_kib(pid, "RssAnon") / 1024,
                "rss_file_mib": status_kib(pid, "RssFile") / 1024}

    def _drain(self):
        for line in self.proc.stdout:
            self.log.write(line)

    def stop(self, sig):
        self.proc.send_signal(sig)
        self.proc.wait(timeout=120)


def for_topics(n, conns, port, work):
    errors = []

    def run(c):
        try:
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for i in range(c, n, conns):
                    work(s, i)
        except Exception as e:  # reported below, the run fails
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def create(broker, n, queues, conns):
    def work(s, i):
        h, _ = call(s, SEND_MESSAGE, i, send_ext(topic(i), i % queues, queues), body_of(i))
        if h["code"] != 0:
            raise RuntimeError(f"send to {topic(i)}: {h}")
    for_topics(n, conns, broker.port, work)


def check_sample(broker, n, queues, samples=200):
    step = max(1, n // samples)
    deadline = time.monotonic() + 60
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        for i in range(0, n, step):
            while True:
                h, body = call(s, PULL_MESSAGE, i, pull_ext(topic(i), i % queues))
                if h["code"] == 0 and body_of(i) in body:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topic(i)} not readable: {h}")
                time.sleep(0.05)


def route_latency(broker, n, samples=500):
    """Median and p99 of GET_ROUTEINFO_BY_TOPIC over a sample of topics, ms."""
    step = max(1, n // samples)
    took = []
    with socket.create_connection(("127.0.0.1", broker.namesrv_port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, n, step):
            t0 = time.monotonic()
            h, body = call(s, GET_ROUTEINFO_BY_TOPIC, i, {"topic": topic(i)})
            took.append((time.monotonic() - t0) * 1000)
            if h["code"] != 0 or b"queueDatas" not in body:
                raise RuntimeError(f"route of {topic(i)}: {h}")
    took.sort()
    return {"route_ms_p50": took[len(took) // 2],
            "route_ms_p99": took[min(len(took) - 1, len(took) * 99 // 100)],
            "route_samples": len(took)}


def disk_kib(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.stat(os.path.join(root, f)).st_blocks // 2
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--data")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    base = args.data or tempfile.mkdtemp(prefix="many-topics-")
    data = os.path.join(base, "data")
    sets = ["diskSpaceWarningLevelRatio=100", "diskSpaceCleanForciblyRatio=100",
            f"maxTopicCount={max(100000, args.n + 100)}"] + args.sets
    b = Broker(os.path.abspath(args.binary), data, sets)
    out = {"topics": args.n, "queues": args.queues}
    try:
        out["fresh"] = b.start()
        anon0 = status_kib(b.proc.pid, "RssAnon")
        t0 = time.monotonic()
        create(b, args.n, args.queues, args.conns)
        took = time.monotonic() - t0
        anon1 = status_kib(b.proc.pid, "RssAnon")
        out["create_s"] = took
        out["create_loadavg_1m"] = os.getloadavg()[0]
        out["create_ms_per_topic"] = took * 1000 / args.n
        out["rss_anon_after_create_mib"] = anon1 / 1024
        out["rss_anon_bytes_per_topic"] = (anon1 - anon0) * 1024 / args.n
        check_sample(b, args.n, args.queues)
        b.stop(signal.SIGTERM)
        out["consumequeue_disk_mib"] = disk_kib(os.path.join(data, "consumequeue")) / 1024
        out["clean_restart"] = b.start()
        check_sample(b, args.n, args.queues)
        b.stop(signal.SIGKILL)
        out["kill9_restart"] = b.start()
        check_sample(b, args.n, args.queues)
        out["route"] = route_latency(b, args.n)
        out["settings"] = args.sets
        b.stop(signal.SIGTERM)
    finally:
        if b.proc and b.proc.poll() is None:
            b.proc.kill()
        if not args.keep and not args.data:
            shutil.rmtree(base, ignore_errors=True)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
