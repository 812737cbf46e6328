#!/usr/bin/env bash
# Basalt's gRPC MessagingService (RocketMQ 5.x SDK for Java) and its
# remoting protocol (`basalt bench`) side by side, on one `basalt
# standalone`, in alternating rounds:
#
#   scripts/bench-grpc.sh                          # the full run (minutes)
#   DURATION=3 WARMUP=2 ROUNDS=1 scripts/bench-grpc.sh   # a smoke run
#
# One broker (ASYNC_FLUSH unless FLUSH=SYNC_FLUSH) on free ports, data in a
# temp dir under $TMPDIR. Then ROUNDS rounds (default 3); in each the two
# paths take turns (the order alternates between rounds) and each runs:
#
#   w1       one sender, each send waits for its receipt, 1 KiB, DURATION s
#   w64      one sender, 64 sends in flight, 1 KiB, DURATION s
#   consume  the backlog w64 left, read by a new group from its first
#            offset; gRPC: a SimpleConsumer, RECEIVERS threads receiving
#            batches of 32, every message acked (ackAsync); remoting:
#            `basalt bench consume --from-first` (push consumer: pulls of 32,
#            offsets committed, no per-message ack)
#
# gRPC: basalt.grpc.Bench from interop/java-grpc-sdk (built by its
# prepare.sh), a Producer with sendAsync and a window of W; it sends WARMUP
# seconds (default 10; after 3 s the JVM's CPU per message over the next
# 10 s was still twice its later figure, the JIT compiling) before the
# DURATION counted. Remoting:
# `basalt bench produce --threads 1 --window W -s 1024 -d DURATION`.
# Every point has a topic of its own (8 queues, created beforehand).
#
# Reported per point: msg/s and latency p50/p99 (µs) over the counted
# interval (send: call to receipt; gRPC consume: each ack's round trip;
# remoting consume: none, its born-to-consumed figure means nothing for a
# backlog), broker CPU µs per message (utime + stime of the broker from
# /proc/PID/stat over the client's whole run, divided by every message the
# broker took in that run, warm-up included), client CPU µs per message two
# ways: "proc" = the client process's user + sys from /usr/bin/time divided
# by the same count (the JVM's start and JIT included), "steady" = the JVM's
# own CPU over the counted interval only (getProcessCpuTime; for `basalt
# bench` the same as proc). Then the median over the rounds.
#
# BASALT_BIN: the broker and remoting client (default
# target/release/basalt, built with `cargo build --release -p basalt` if
# missing).
# JAVA_OPTS: flags for the client JVM (default -Xms512m -Xmx512m).
# RUST_SDK=1 adds a path: the Rust 5.x SDK (crate rocketmq 5.0.0,
# interop/rust-grpc-sdk's bench-send / bench-consume, built here in
# release) against the same gRPC port: 2 s of warm-up; consume: one
# receive of 32 at a time, its 32 acks concurrently before the next.
# PROXY=1 adds a path, the SDK load against Apache RocketMQ's proxy in
# local mode (scripts/java-proxy.sh, built by interop/java-proxy/prepare.sh;
# JVM flags of RocketMQ's runbroker.sh, heap PROXY_HEAP, default 2g); its
# CPU is the proxy process's (the broker runs inside it; its NameServer, a
# process of its own, is not counted).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-10}
ROUNDS=${ROUNDS:-3}
RECEIVERS=${RECEIVERS:-4}
FLUSH=${FLUSH:-ASYNC_FLUSH}
JAVA_OPTS=${JAVA_OPTS:-"-Xms512m -Xmx512m"}
PROXY_HEAP=${PROXY_HEAP:-2g}
bin=${BASALT_BIN:-target/release/basalt}
if [ -z "${BASALT_BIN:-}" ] && [ ! -x "$bin" ]; then
  cargo build --release -q -p basalt
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
bash interop/java-grpc-sdk/prepare.sh
sdk_cp=$(cat target/interop/java-grpc-sdk/sdk.classpath)
paths=(grpc remoting)
rust_sdk=target/interop/rust-grpc-sdk/cargo-release/release/rustgrpcsdk
if [ "${RUST_SDK:-0}" = 1 ]; then
  CARGO_TARGET_DIR=target/interop/rust-grpc-sdk/cargo-release \
    cargo build --release --locked -q --manifest-path interop/rust-grpc-sdk/Cargo.toml
  paths+=(rust)
fi
if [ "${PROXY:-0}" = 1 ]; then
  bash interop/java-proxy/prepare.sh
  paths+=(proxy)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-grpc.XXXXXX")
pids=()
cleanup() {
  for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work" ${proxy_ns_home:+"$proxy_ns_home"}
}
trap cleanup EXIT

used_ports=" "
# free_port: sets $port to a port free now, with port−2 and port+1 free
# too (the Java broker's fast and HA ports), none handed out before.
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

# launch NAME READY_TEXT CMD...: starts CMD in the background, waits for
# READY_TEXT in its output, sets $launched_pid.
launch() {
  local name=$1 ready=$2
  shift 2
  "$@" >"$work/$name.log" 2>&1 &
  launched_pid=$!
  pids+=("$launched_pid")
  for _ in $(seq 1 12000); do
    grep -q "$ready" "$work/$name.log" 2>/dev/null && return 0
    kill -0 "$launched_pid" 2>/dev/null || break
    sleep 0.01
  done
  echo "$name did not start:" >&2
  tail -n 40 "$work/$name.log" >&2
  exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# create_topic NAMESRV TOPIC: 8 queues (retried: a Java broker registers
# with its NameServer a little after it says it started).
create_topic() {
  for _ in $(seq 1 120); do
    "$bin" admin --namesrv "$1" topic create -t "$2" --queues 8 >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  "$bin" admin --namesrv "$1" topic create -t "$2" --queues 8
}

# sdk CMD-ARGS...: runs basalt.grpc.Bench under /usr/bin/time.
sdk() {
  # shellcheck disable=SC2086
  /usr/bin/time -f "%U %S" -o "$work/time" java $JAVA_OPTS -cp "$sdk_cp" basalt.grpc.Bench "$@"
}
# remoting CMD-ARGS...: runs `basalt bench` under /usr/bin/time.
remoting() { /usr/bin/time -f "%U %S" -o "$work/time" "$bin" bench "$@"; }

# run_point PATH ROUND POINT: runs one point against the server of PATH
# ($ns_PATH, $grpc_PATH, $pid_PATH), appends a row to $results.
run_point() {
  local path=$1 round=$2 name=$3 out before after topic handled
  topic="Bench_${path}_${name}_r${round}"
  [ "$name" = consume ] && topic="Bench_${path}_w64_r${round}"
  out=$work/$path-$round-$name.json
  local ns_var=ns_$path grpc_var=grpc_$path pid_var=pid_$path
  local ns=${!ns_var} endpoint=${!grpc_var} pid=${!pid_var}
  before=$(cpu_ticks "$pid")
  case $path:$name in
    remoting:w*)
      remoting produce --namesrv "$ns" -t "$topic" --threads 1 --window "${name#w}" -s 1024 \
        -d "$DURATION" --json >"$out" ;;
    remoting:consume)
      remoting consume --namesrv "$ns" -t "$topic" -g "bench-consume-r$round" --from-first \
        -n "$(backlog "$path" "$round")" -d $((DURATION * 12)) --json >"$out" ;;
    rust:w*)
      /usr/bin/time -f "%U %S" -o "$work/time" "$rust_sdk" --endpoint "$endpoint" bench-send "$topic" \
        "${name#w}" 2 "$DURATION" >"$out" 2>>"$work/rust-sdk.log" ;;
    rust:consume)
      /usr/bin/time -f "%U %S" -o "$work/time" "$rust_sdk" --endpoint "$endpoint" bench-consume "$topic" \
        "bench-consume-r$round" "$(backlog "$path" "$round")" >"$out" 2>>"$work/rust-sdk.log" ;;
    *:w*)
      sdk "$endpoint" send --topic "$topic" --size 1024 --window "${name#w}" --warmup "$WARMUP" \
        --duration "$DURATION" >"$out" ;;
    *:consume)
      # The proxy refuses a SimpleConsumer of a group that does not exist
      # (Basalt creates it, as a broker with autoCreateSubscriptionGroup).
      [ "$path" = proxy ] && "$bin" admin --namesrv "$ns" group create -g "bench-consume-r$round" \
        -c DefaultCluster >/dev/null
      sdk "$endpoint" consume --topic "$topic" --group "bench-consume-r$round" \
        --count "$(backlog "$path" "$round")" --batch 32 --receivers "$RECEIVERS" \
        --timeout $((DURATION * 12)) >"$out" ;;
  esac
  after=$(cpu_ticks "$pid")
  python3 - "$out" "$path" "$round" "$name" $((after - before)) "$hz" $(tail -n 1 "$work/time") \
    >>"$results" <<'EOF'
import json, sys
out, path, rnd, name, ticks, hz, user, sys_ = sys.argv[1:]
v = json.loads([l for l in open(out) if l.startswith("{")][-1])
n = v["msgs"]
# Every message the broker took (send) or gave (consume) during the run.
handled = v.get("sent_total", n + 1 if path == "remoting" and name != "consume" else n)
lat = v.get("latency_us", {}) if not (path == "remoting" and name == "consume") else {}
per = lambda secs: secs * 1e6 / handled if handled else float("nan")
proc = per(float(user) + float(sys_))
steady = v.get("client_cpu_us_per_msg", proc)
print("\t".join([rnd, path, name, str(n), "%.0f" % v["msgs_per_sec"],
                 "%.0f" % lat.get("p50", float("nan")), "%.0f" % lat.get("p99", float("nan")),
                 "%.2f" % per(int(ticks) / int(hz)), "%.2f" % proc, "%.2f" % steady,
                 str(v.get("errors", 0) + v.get("duplicates", 0))]))
EOF
  tail -n 1 "$results"
}

# backlog PATH ROUND: how many messages the w64 point of that round left.
backlog() {
  python3 - "$work/$1-$2-w64.json" "$1" <<'EOF'
import json, sys
v = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
print(v.get("sent_total", v["msgs"]))
EOF
}

start_basalt() {
  free_port; ns_grpc=127.0.0.1:$port; free_port; local bp=$port; free_port; local gp=$port
  launch basalt "basalt standalone ready" "$bin" standalone --data "$work/basalt" \
    --namesrv-port "${ns_grpc#*:}" --port "$bp" --listen 127.0.0.1 --advertise 127.0.0.1 \
    --set "flushDiskType=$FLUSH" --set "grpcServerPort=$gp" --set metricsExporterType=DISABLE
  pid_grpc=$launched_pid grpc_grpc=127.0.0.1:$gp
  ns_remoting=$ns_grpc pid_remoting=$pid_grpc grpc_remoting=""
  ns_rust=$ns_grpc pid_rust=$pid_grpc grpc_rust=$grpc_grpc
}

# The proxy in local mode and its NameServer (from the proxy's classpath).
start_proxy() {
  free_port; local np=$port; free_port; local bp=$port; free_port; local pp=$port
  proxy_ns_home=${TMPDIR:-/tmp}/basalt-java-namesrv-$np # java-broker.sh's
  JAVA_BROKER_CLASSPATH=target/interop/java-proxy/proxy.classpath \
    launch proxy-namesrv "boot success" scripts/java-broker.sh namesrv --port "$np"
  JAVA_BROKER_PROFILE=bench launch proxy "rocketmq-proxy startup successfully" scripts/java-proxy.sh \
    --namesrv "127.0.0.1:$np" --broker-port "$bp" --grpc-port "$pp" --store "$work/proxy" --flush "$FLUSH" \
    --heap "$PROXY_HEAP"
  ns_proxy=127.0.0.1:$np pid_proxy=$launched_pid grpc_proxy=127.0.0.1:$pp
}

results=$work/results.tsv
: >"$results"
echo "# basalt: $bin (built $(date -u -r "$bin" +%FT%TZ))"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
start_basalt
echo "# basalt standalone $FLUSH, gRPC $grpc_grpc, NameServer $ns_grpc"
[ "${PROXY:-0}" = 1 ] && { start_proxy; echo "# proxy (local mode) gRPC $grpc_proxy"; }
printf 'round\tpath\tpoint\tmsgs\tmsg/s\tp50us\tp99us\tbroker_us/msg\tclient_proc_us/msg\tclient_steady_us/msg\terrors\n'
for round in $(seq 1 "$ROUNDS"); do
  for path in "${paths[@]}"; do
    for name in w1 w64; do
      ns_var=ns_$path
      create_topic "${!ns_var}" "Bench_${path}_${name}_r${round}"
    done
  done
  order=("${paths[@]}")
  if [ $((round % 2)) = 0 ]; then
    order=()
    for ((i = ${#paths[@]} - 1; i >= 0; i--)); do order+=("${paths[$i]}"); done
  fi
  for path in "${order[@]}"; do
    for name in w1 w64 consume; do run_point "$path" "$round" "$name"; done
  done
  echo "# load after round $round: $(cut -d' ' -f1-3 /proc/loadavg)"
done

echo
echo "# median over $ROUNDS round(s)"
python3 - "$results" <<'EOF'
import sys, statistics
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    groups.setdefault((r[2], r[1]), []).append(r)
print("| point | path | msg/s | p50 µs | p99 µs | broker CPU µs/msg | client CPU µs/msg (proc / steady) | errors |")
print("|---|---|---|---|---|---|---|---|")
for (name, path), rs in sorted(groups.items()):
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    lat = "—" if rs[0][5] == "nan" else "%.0f" % med(5)
    lat99 = "—" if rs[0][6] == "nan" else "%.0f" % med(6)
    print("| %s | %s | %.0f | %s | %s | %.1f | %.1f / %.1f | %d |" % (
        name, path, med(4), lat, lat99, med(7), med(8), med(9), sum(int(r[10]) for r in rs)))
EOF
