#!/usr/bin/env python3
"""Time a kill -9 restart of `basalt standalone` on an existing store.

    scripts/kill9_restart.py BASALT_BINARY DATA_DIR [PREFIX...]

Starts the broker on DATA_DIR (e.g. one scripts/many_topics.py --data left),
waits for its ready line, SIGKILLs it 2 s later, starts it again (under the
PREFIX command if given, e.g. `strace -f -c -o FILE`) and prints the time
from spawn to the ready line of both starts, with the 1-minute load average
and the store's `store recovered` log line (per-phase times); then waits
SETTLE seconds (env, default 3) printing the background ConsumeQueue sync
line, and stops it with SIGTERM.
"""
import os, signal, subprocess, sys, time, socket, resource
binary, data = sys.argv[1], sys.argv[2]
prefix = sys.argv[3:]  # e.g. strace -c -f -o FILE
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def start(pre):
    cmd = pre + [binary, "standalone", "--data", data, "--namesrv-port", str(port()), "--port", str(port()),
           "--listen", "127.0.0.1", "--advertise", "127.0.0.1",
           "--set", "diskSpaceWarningLevelRatio=100", "--set", "diskSpaceCleanForciblyRatio=100",
           "--set", "maxTopicCount=100000"]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ, BASALT_LOG="info"))
    lines = []
    for line in p.stdout:
        t = line.decode(errors="replace"); lines.append(t)
        if "store recovered" in t or "made durable" in t: print(t.strip()[:900], flush=True)
        if "basalt standalone ready" in t: break
    return p, time.monotonic() - t0
p, t = start([]); print(f"clean start {t:.2f}s load {os.getloadavg()[0]:.1f}", flush=True)
time.sleep(2)
p.send_signal(signal.SIGKILL); p.wait()
p, t = start(prefix); print(f"kill9 restart {t:.2f}s load {os.getloadavg()[0]:.1f}", flush=True)
def drain():
    for line in p.stdout:
        t = line.decode(errors="replace")
        if "made durable" in t: print(t.strip()[:400], flush=True)
import threading; threading.Thread(target=drain, daemon=True).start()
time.sleep(float(os.environ.get("SETTLE", "3")))
p.send_signal(signal.SIGTERM); p.wait(timeout=600)
