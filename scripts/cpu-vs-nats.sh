#!/usr/bin/env bash
# CPU per message, Basalt against NATS JetStream, side by side in one run
# (issue 33): the load of ../shared/peers/vs-nats.sh (1 KiB, one publisher,
# W acks in flight, file store, one replica, each side's default
# durability: Basalt ASYNC_FLUSH, NATS its 2-minute sync), in alternating
# rounds. Per round and side: msg/s, the server's CPU per message
# (utime + stime of the process from /proc/PID/stat, over the run) and the
# client's (/usr/bin/time).
#
#   scripts/cpu-vs-nats.sh [ROUNDS]
#
# Env: W (default 256), D (Basalt seconds, default 6), COUNT (NATS
# messages, default 600000), BASALT_BIN (default target/release/basalt),
# PEER_DIR (nats-server and the nats-bench client, as vs-nats.sh fetches
# and builds them; default $TMPDIR/basalt-peers). PERF=1 also records a
# `perf record -g` profile of each server's first round into PEER_DIR.
# MODE: produce (default); batch16 (Basalt sends batches of 16 messages,
# NATS single messages: it has no batch publish); consume (each side is
# filled first, unmeasured, then one consumer reads everything from the
# start: Basalt's push consumer, NATS's pull consumer without acks; the
# figures cover the read only). VARIANT="key=value ..." adds broker.conf
# settings to Basalt's broker (--set). CONSUME_ARGS adds arguments to
# `basalt bench consume`, e.g. CONSUME_ARGS=--async-listener.
# The NATS client runs on one tokio worker (TOKIO_WORKER_THREADS=1), as
# `basalt bench produce --threads 1` does.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
W=${W:-256}; D=${D:-6}; COUNT=${COUNT:-600000}; MODE=${MODE:-produce}
case "$MODE" in produce|batch16|consume) ;; *) echo "MODE is produce, batch16 or consume"; exit 2;; esac
sets=()
for kv in ${VARIANT:-}; do sets+=(--set "$kv"); done
bin=${BASALT_BIN:-target/release/basalt}
P=${PEER_DIR:-${TMPDIR:-/tmp}/basalt-peers}
NS=$P/nats-server; NB=$P/nats-bench-target/release/nats-bench
[ -x "$bin" ] || { echo "no $bin (cargo build --release -p basalt)"; exit 2; }
[ -x "$NS" ] && [ -x "$NB" ] || { echo "run ../shared/peers/vs-nats.sh once to fetch NATS into $P"; exit 2; }
tmp=$(mktemp -d)
pid=; ns=; np=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
wait_log() { for _ in $(seq 1 500); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.01; done; return 1; }

profile() { # NAME ROUND
  if [ "${PERF:-0}" = 1 ] && [ "$2" = 1 ]; then
    perf record -q -g -F 999 -p "$pid" -o "$P/$1.perf.data" -- sleep 4 >/dev/null 2>&1 &
  fi
}

report() { # SIDE MSGS MSG/S SERVER_TICKS TIMEFILE
  awk -v side="$1" -v n="$2" -v rate="$3" -v t="$4" -v hz="$hz" -v c="$(cat "$5")" 'BEGIN {
    split(c, u, " ")
    printf "%-7s %8.0f msg/s  server %6.2f us/msg  client %6.2f us/msg\n",
      side, rate, t * 1e6 / hz / n, (u[1] + u[2]) * 1e6 / n }'
}

basalt_produce() { # OUT [ARGS...]: bench produce for D seconds, under /usr/bin/time
  local out=$1; shift
  /usr/bin/time -f "%U %S" -o "$tmp/bc.time" "$bin" bench produce --namesrv "127.0.0.1:$ns" \
    -t VsNats --threads 1 --window "$W" -s 1024 -d "$D" "$@" > "$out" 2>/dev/null
}

basalt_round() {
  local bp before out n rate batch=()
  ns=$(port); bp=$(port); rm -rf "$tmp/b"
  "$bin" standalone --data "$tmp/b" --namesrv-port "$ns" --port "$bp" --listen 127.0.0.1 \
    --set flushDiskType=ASYNC_FLUSH "${sets[@]}" > "$tmp/b.log" 2>&1 &
  pid=$!
  wait_log "$tmp/b.log" "basalt standalone"
  [ "$MODE" = batch16 ] && batch=(--batch 16)
  if [ "$MODE" = consume ]; then
    basalt_produce "$tmp/bp.out"
    n=$(grep '^total' "$tmp/bp.out" | awk '{print $2}')
    before=$(ticks "$pid")
    profile basalt "$1"
    /usr/bin/time -f "%U %S" -o "$tmp/bc.time" "$bin" bench consume --namesrv "127.0.0.1:$ns" \
      -t VsNats --from-first -n "$n" -d 120 ${CONSUME_ARGS:-} > "$tmp/bc.out" 2>/dev/null
  else
    before=$(ticks "$pid")
    profile basalt "$1"
    basalt_produce "$tmp/bc.out" "${batch[@]}"
  fi
  out=$(grep '^total' "$tmp/bc.out")
  n=$(echo "$out" | awk '{print $2}'); rate=$(echo "$out" | awk '{print $7}')
  report basalt "$n" "$rate" $(( $(ticks "$pid") - before )) "$tmp/bc.time"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

nats_pub() { # OUT
  TOKIO_WORKER_THREADS=1 /usr/bin/time -f "%U %S" -o "$tmp/nc.time" "$NB" pub \
    --url "127.0.0.1:$np" --subject bench.x --count "$COUNT" --size 1024 --window "$W" > "$1" 2>&1
}

nats_round() {
  local before rate
  np=$(port); rm -rf "$tmp/js"
  "$NS" -a 127.0.0.1 -p "$np" -js -sd "$tmp/js" > "$tmp/n.log" 2>&1 &
  pid=$!
  wait_log "$tmp/n.log" "Server is ready"
  "$NB" setup --url "127.0.0.1:$np" --stream BENCH --subject bench.x --storage file > /dev/null 2>&1
  if [ "$MODE" = consume ]; then
    nats_pub "$tmp/np.out"
    before=$(ticks "$pid")
    profile nats "$1"
    TOKIO_WORKER_THREADS=1 /usr/bin/time -f "%U %S" -o "$tmp/nc.time" "$NB" sub \
      --url "127.0.0.1:$np" --stream BENCH --count "$COUNT" --ack none > "$tmp/nc.out" 2>&1
  else
    before=$(ticks "$pid")
    profile nats "$1"
    nats_pub "$tmp/nc.out"
  fi
  rate=$(grep -oE 'msgs/s=[0-9]+' "$tmp/nc.out" | head -1 | cut -d= -f2)
  report nats "$COUNT" "$rate" $(( $(ticks "$pid") - before )) "$tmp/nc.time"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

echo "MODE=$MODE W=$W D=$D COUNT=$COUNT VARIANT=${VARIANT:-} CONSUME_ARGS=${CONSUME_ARGS:-}, $rounds rounds"
for r in $(seq 1 "$rounds"); do
  echo "round $r"
  basalt_round "$r"
  nats_round "$r"
done
