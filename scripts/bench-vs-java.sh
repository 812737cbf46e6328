#!/usr/bin/env bash
# Basalt and Apache RocketMQ 5.5.0's broker side by side, measured by the
# same client (`basalt bench`), in alternating rounds, on this machine:
#
#   scripts/bench-vs-java.sh                     # the full run (minutes)
#   DURATION=3 ROUNDS=1 JAVA_HEAP=1g scripts/bench-vs-java.sh   # a smoke run
#
# For each flush mode (FLUSH_MODES, default "ASYNC_FLUSH SYNC_FLUSH") both
# brokers are started on free ports with fresh data in a temp dir under
# $TMPDIR (put it on the disk to measure): Basalt as `basalt standalone`
# (NameServer and broker in one process), the Java broker with its own
# NameServer through scripts/java-broker.sh with JAVA_BROKER_PROFILE=bench
# (the flags of RocketMQ's runbroker.sh: G1, 16 MiB regions,
# AlwaysPreTouch, ...) and -Xms/-Xmx $JAVA_HEAP (default 4g). Start-up time
# is from launch to the ready line (Basalt: "basalt standalone ready";
# Java: "boot success", the JVM's start included; its NameServer was
# started before and is not counted). Then ROUNDS rounds (default 3); in
# each, the two brokers take turns (the order alternates between rounds),
# and each runs every point for DURATION seconds (default 10):
#
#   p1x1     1 thread, window 1 (each send waits for its ack), 1 KiB
#   p1x64    1 thread, 64 sends in flight, 1 KiB
#   p4x64    4 threads, 64 in flight each, 1 KiB
#   b16      4 threads, 16 batches of 16 in flight each (SEND_BATCH_MESSAGE)
#   consume  the backlog p4x64 left, read from its first offset by a new group
#
# Every point uses a topic of its own with 8 queues created beforehand on
# each broker. Reported per point: msg/s, latency p50/p99/p99.9 (µs; for
# consume born-to-consumed), the broker process's CPU per message (utime +
# stime from /proc/PID/stat over the point; Java's NameServer is not
# counted, Basalt's is inside its process) and its RSS after the point (VmRSS, and
# RssAnon: without the page cache of mapped files).
# At the end, per flush mode, broker and point, the median over the rounds.
# CPU per message includes what the broker does while idle (timers,
# housekeeping threads), which dominates at low rates (p1x1); round 1 also
# pays the JVM's JIT warm-up, hence ROUNDS ≥ 3 and the median.
#
# BASALT_BIN: the basalt binary (default target/release/basalt, built if
# missing); the same binary is the client for both brokers. The Java broker
# must have been built by interop/java-broker/prepare.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
JAVA_HEAP=${JAVA_HEAP:-4g}
FLUSH_MODES=${FLUSH_MODES:-"ASYNC_FLUSH SYNC_FLUSH"}
bin=${BASALT_BIN:-target/release/basalt}
if [ -z "${BASALT_BIN:-}" ] && [ ! -x "$bin" ]; then
  cargo build --release -q -p basalt
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -f target/interop/java-broker/READY ] || bash interop/java-broker/prepare.sh

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-java.XXXXXX")
pids=()
cleanup() {
  for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

used_ports=" "
# free_port: sets $port to a port free now with port−2 and port+1 free too
# (the Java broker's fast and HA ports), none handed out before.
free_port() {
  while :; do
    port=$(python3 -c 'import socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p)); return True
    except OSError:
        return False
    finally:
        s.close()
while True:
    s = socket.socket(); s.bind(("0.0.0.0", 0)); p = s.getsockname()[1]; s.close()
    if 2000 < p < 64000 and free(p - 2) and free(p + 1):
        break
print(p)')
    case $used_ports in *" $port "* | *" $((port - 2)) "* | *" $((port + 1)) "*) continue ;; esac
    used_ports="$used_ports$((port - 2)) $port $((port + 1)) "
    return
  done
}

now_ms() { date +%s%3N; }

# launch NAME READY_TEXT CMD...: starts CMD in the background, waits for
# READY_TEXT in its output, sets $launched_pid and $startup_ms.
launch() {
  local name=$1 ready=$2
  shift 2
  local t0
  t0=$(now_ms)
  "$@" >"$work/$name.log" 2>&1 &
  launched_pid=$!
  pids+=("$launched_pid")
  for _ in $(seq 1 12000); do
    if grep -q "$ready" "$work/$name.log" 2>/dev/null; then
      startup_ms=$(($(now_ms) - t0))
      return 0
    fi
    kill -0 "$launched_pid" 2>/dev/null || break
    sleep 0.01
  done
  echo "$name did not start:" >&2
  tail -n 40 "$work/$name.log" >&2
  exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_mib() { awk '/VmRSS/ {printf "%d", $2 / 1024}' "/proc/$1/status"; }
# The process's own memory: RSS without the mapped files' page cache
# (Basalt's mapped CommitLog counts in VmRSS; the kernel can reclaim it).
anon_mib() { awk '/RssAnon/ {printf "%d", $2 / 1024}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)

results=$work/results.tsv
: >"$results"

# point BROKER FLUSH ROUND PID NS NAME: runs one point, appends a result row.
point() {
  local broker=$1 flush=$2 round=$3 pid=$4 ns=$5 name=$6 out before after
  local topic="Bench_${name}_r${round}"
  [ "$name" = consume ] && topic="Bench_p4x64_r${round}"
  out=$work/$broker-$flush-$round-$name.json
  before=$(cpu_ticks "$pid")
  case $name in
    p1x1) "$bin" bench produce --namesrv "$ns" -t "$topic" --threads 1 --window 1 -s 1024 -d "$DURATION" --json >"$out" ;;
    p1x64) "$bin" bench produce --namesrv "$ns" -t "$topic" --threads 1 --window 64 -s 1024 -d "$DURATION" --json >"$out" ;;
    p4x64) "$bin" bench produce --namesrv "$ns" -t "$topic" --threads 4 --window 64 -s 1024 -d "$DURATION" --json >"$out" ;;
    b16) "$bin" bench produce --namesrv "$ns" -t "$topic" --threads 4 --window 16 --batch 16 -s 1024 -d "$DURATION" --json >"$out" ;;
    consume)
      local backlog
      backlog=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["msgs"])' \
        "$work/$broker-$flush-$round-p4x64.json")
      "$bin" bench consume --namesrv "$ns" -t "$topic" -g "bench-consume-r$round" --from-first \
        -n "$backlog" -d $((DURATION * 6)) --json >"$out"
      ;;
  esac
  after=$(cpu_ticks "$pid")
  python3 - "$out" "$broker" "$flush" "$round" "$name" $((after - before)) "$hz" "$(rss_mib "$pid")" "$(anon_mib "$pid")" >>"$results" <<'EOF'
import json, sys
out, broker, flush, rnd, name, ticks, hz, rss, anon = sys.argv[1:]
v = json.loads(open(out).read().strip().splitlines()[-1])
n = v["msgs"]
lat = v.get("latency_us", {})
cpu = int(ticks) * 1e6 / int(hz) / n if n else float("nan")
print("\t".join([flush, rnd, broker, name, "%.0f" % v["msgs_per_sec"],
                 "%.0f" % lat.get("p50", 0), "%.0f" % lat.get("p99", 0),
                 "%.0f" % lat.get("p999", 0), "%.2f" % cpu, rss, str(v.get("errors", 0)), anon]))
EOF
  tail -n 1 "$results"
}

# create_topic NAMESRV TOPIC: 8 queues; retried for up to 60 s, since the
# Java broker registers with its NameServer a little after "boot success".
create_topic() {
  for _ in $(seq 1 120); do
    "$bin" admin --namesrv "$1" topic create -t "$2" --queues 8 >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  "$bin" admin --namesrv "$1" topic create -t "$2" --queues 8
}

points=(p1x1 p1x64 p4x64 b16 consume)
printf 'flush\tround\tbroker\tpoint\tmsg/s\tp50us\tp99us\tp999us\tcpu_us/msg\trssMiB\terrors\tanonMiB\n'
for flush in $FLUSH_MODES; do
  free_port; b_ns=$port; free_port; b_port=$port
  launch "basalt-$flush" "basalt standalone ready" "$bin" standalone --data "$work/basalt-$flush" \
    --namesrv-port "$b_ns" --port "$b_port" --listen 127.0.0.1 --advertise 127.0.0.1 \
    --set "flushDiskType=$flush" --set metricsExporterType=DISABLE --set dashboardEnable=false
  b_pid=$launched_pid
  echo "# basalt $flush: ready in $startup_ms ms, idle RSS $(rss_mib "$b_pid") MiB (anonymous $(anon_mib "$b_pid") MiB)"

  free_port; j_ns=$port
  launch "java-namesrv-$flush" "boot success" scripts/java-broker.sh namesrv --port "$j_ns"
  jn_pid=$launched_pid
  free_port; j_port=$port
  JAVA_BROKER_PROFILE=bench launch "java-broker-$flush" "boot success" scripts/java-broker.sh broker \
    --namesrv "127.0.0.1:$j_ns" --port "$j_port" --store "$work/java-$flush" --flush "$flush" \
    --heap "$JAVA_HEAP"
  j_pid=$launched_pid
  echo "# java $flush: ready in $startup_ms ms (JVM start included), idle RSS $(rss_mib "$j_pid") MiB (anonymous $(anon_mib "$j_pid") MiB)"

  for round in $(seq 1 "$ROUNDS"); do
    for name in p1x1 p1x64 p4x64 b16; do
      create_topic "127.0.0.1:$b_ns" "Bench_${name}_r${round}"
      create_topic "127.0.0.1:$j_ns" "Bench_${name}_r${round}"
    done
    order=(basalt java)
    [ $((round % 2)) = 0 ] && order=(java basalt)
    for broker in "${order[@]}"; do
      for name in "${points[@]}"; do
        if [ "$broker" = basalt ]; then
          point basalt "$flush" "$round" "$b_pid" "127.0.0.1:$b_ns" "$name"
        else
          point java "$flush" "$round" "$j_pid" "127.0.0.1:$j_ns" "$name"
        fi
      done
    done
  done
  for p in "$b_pid" "$j_pid" "$jn_pid"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work/basalt-$flush" "$work/java-$flush" "$work/java-$flush.home"
done

echo
echo "# median over $ROUNDS round(s), per flush mode, broker and point"
python3 - "$results" <<'EOF'
import sys, statistics
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    groups.setdefault((r[0], r[2], r[3]), []).append(r)
print("flush\tbroker\tpoint\tmsg/s\tp50us\tp99us\tp999us\tcpu_us/msg\trssMiB\tanonMiB")
for (flush, broker, name), rs in sorted(groups.items()):
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    print("%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f" % (
        flush, broker, name, med(4), med(5), med(6), med(7), med(8), med(9), med(11)))
EOF
