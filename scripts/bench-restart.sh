#!/usr/bin/env bash
# Restart time with a full CommitLog, Basalt and Apache RocketMQ 5.5.0's
# broker one after the other, on this machine:
#
#   scripts/bench-restart.sh                  # 10 GiB each (minutes, ~12 GB of disk)
#   FILL_GIB=1 scripts/bench-restart.sh       # a smoke run
#
# For each broker (BROKERS, default "basalt java"), with ASYNC_FLUSH and
# fresh data in a temp dir under $TMPDIR (put it on the disk to measure):
#
#   1. start it (Basalt: `basalt standalone`; Java: its NameServer, then
#      scripts/java-broker.sh broker with JAVA_BROKER_PROFILE=bench, the
#      flags of RocketMQ's runbroker.sh, and -Xms/-Xmx $JAVA_HEAP, default
#      4g) and fill its CommitLog to FILL_GIB GiB (its commitLogMaxOffset,
#      which GET_BROKER_RUNTIME_INFO reports the same way for both) with
#      `basalt bench produce`: 4 threads, batches of 16 messages of
#      BODY_SIZE bytes (default 16 KiB), into one topic of 8 queues;
#   2. clean restart: SIGTERM, wait for the process to exit, start again;
#   3. crash restart: kill -9, start again.
#
# Each start is timed from launch to three marks: the port accepts a TCP
# connection; the ready line (Basalt "basalt standalone ready", Java "boot
# success"); and the first send that succeeds (`basalt produce -n 1`, tried
# again every 100 ms from the moment the port accepts). The first
# successful send is the figure compared: it is the same criterion for
# both. The Java NameServer stays up across the broker's restarts (it is
# not counted); Basalt's NameServer is in its process and restarts with it.
# The page cache is warm (the CommitLog was just written): this measures
# recovery work, not a cold disk. The data is deleted at the end.
#
# BASALT_BIN: the basalt binary (default target/release/basalt, built if
# missing), also the client for both brokers. The Java broker must have
# been built by interop/java-broker/prepare.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

FILL_GIB=${FILL_GIB:-10}
BODY_SIZE=${BODY_SIZE:-16384}
JAVA_HEAP=${JAVA_HEAP:-4g}
BROKERS=${BROKERS:-"basalt java"}
bin=${BASALT_BIN:-target/release/basalt}
if [ -z "${BASALT_BIN:-}" ] && [ ! -x "$bin" ]; then
  cargo build --release -q -p basalt
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -f target/interop/java-broker/READY ] || bash interop/java-broker/prepare.sh

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-restart.XXXXXX")
pids=()
cleanup() {
  for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 1" INT TERM

# free_port: sets $port to a port free now with port−2 and port+1 free too
# (the Java broker's fast and HA ports).
free_port() {
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
    if 2000 < p < 64000 and free(p - 2) and free(p + 1) and free(p + 3):
        break
print(p)')
}

now_ms() { date +%s%3N; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# launch NAME LOG READY_TEXT CMD...: starts CMD in the background, waits
# for READY_TEXT in LOG; sets $launched_pid and $ready_ms.
launch() {
  local name=$1 log=$2 ready=$3
  shift 3
  local t0
  t0=$(now_ms)
  : >"$log"
  "$@" >>"$log" 2>&1 &
  launched_pid=$!
  pids+=("$launched_pid")
  for _ in $(seq 1 60000); do
    if grep -q "$ready" "$log" 2>/dev/null; then
      ready_ms=$(($(now_ms) - t0))
      return 0
    fi
    kill -0 "$launched_pid" 2>/dev/null || break
    sleep 0.01
  done
  echo "$name did not start:" >&2
  tail -n 40 "$log" >&2
  exit 1
}

# timed_start BROKER KIND: starts the broker on its store and appends a
# row to $results: broker, kind, ms from launch to the port, the ready
# line and the first successful send.
timed_start() {
  local broker=$1 kind=$2 t0 port_ms="" send_ms="" log
  starts=$((starts + 1))
  log=$work/$broker-$starts.log
  : >"$log"
  ready_watch "$log"
  t0=$(now_ms)
  start_broker "$broker" "$log" &
  broker_pid=$!
  pids+=("$broker_pid")
  while :; do
    kill -0 "$broker_pid" 2>/dev/null || { tail -n 40 "$log" >&2; exit 1; }
    if [ -z "$port_ms" ] && port_open "$bport"; then port_ms=$(($(now_ms) - t0)); fi
    if [ -n "$port_ms" ]; then
      if timeout 20 "$bin" produce --namesrv "$ns" -t RestartProbe -n 1 --json >/dev/null 2>&1; then
        send_ms=$(($(now_ms) - t0))
        break
      fi
      sleep 0.1
    else
      sleep 0.01
    fi
  done
  wait "$watch_pid" 2>/dev/null || true
  printf '%s\t%s\t%s\t%s\t%s\n' "$broker" "$kind" "$port_ms" "$(cat "$log.ready")" "$send_ms" |
    tee -a "$results"
}

# start_broker BROKER LOG: execs the broker on its store (foreground).
start_broker() {
  local broker=$1 log=$2
  if [ "$broker" = basalt ]; then
    exec "$bin" standalone --data "$work/store-basalt" --namesrv-port "$nsport" --port "$bport" \
      --listen 127.0.0.1 --advertise 127.0.0.1 --set flushDiskType=ASYNC_FLUSH \
      --set metricsExporterType=DISABLE --set dashboardEnable=false >>"$log" 2>&1
  else
    JAVA_BROKER_PROFILE=bench exec scripts/java-broker.sh broker --namesrv "$ns" --port "$bport" \
      --store "$work/store-java" --flush ASYNC_FLUSH --heap "$JAVA_HEAP" >>"$log" 2>&1
  fi
}

# ready_watch LOG: writes ms from now to the ready line into LOG.ready
# (in the background; $watch_pid).
ready_watch() {
  local log=$1 t0
  t0=$(now_ms)
  (
    for _ in $(seq 1 60000); do
      if grep -q "$ready_text" "$log" 2>/dev/null; then
        echo $(($(now_ms) - t0)) >"$log.ready"
        exit 0
      fi
      sleep 0.01
    done
    echo "" >"$log.ready"
  ) &
  watch_pid=$!
}

# max_offset: the broker's commitLogMaxOffset (0 when it does not answer
# within 5 s).
max_offset() {
  local v
  v=$(timeout 5 "$bin" admin --namesrv "$ns" broker "127.0.0.1:$bport" 2>/dev/null |
    awk '$1 == "commitLogMaxOffset" {print $2; exit}') || true
  echo "${v:-0}"
}

stop() {
  kill "-$1" "$broker_pid" 2>/dev/null || true
  wait "$broker_pid" 2>/dev/null || true
}

results=$work/results.tsv
: >"$results"
starts=0
for broker in $BROKERS; do
  free_port; nsport=$port
  free_port; bport=$port
  ns=127.0.0.1:$nsport
  if [ "$broker" = basalt ]; then
    ready_text="basalt standalone ready"
    store=$work/store-basalt
  else
    ready_text="boot success"
    store=$work/store-java
    launch java-namesrv "$work/java-namesrv.log" "boot success" \
      scripts/java-broker.sh namesrv --port "$nsport"
  fi

  # Fill.
  log=$work/$broker-fill.log
  ready_watch "$log"
  start_broker "$broker" "$log" &
  broker_pid=$!
  pids+=("$broker_pid")
  wait "$watch_pid"
  for t in Fill RestartProbe; do
    for _ in $(seq 1 120); do
      "$bin" admin --namesrv "$ns" topic create -t "$t" --queues 8 >/dev/null 2>&1 && break
      sleep 0.5
    done
  done
  t0=$(now_ms)
  "$bin" bench produce --namesrv "$ns" -t Fill --threads 4 --window 8 --batch 16 \
    -s "$BODY_SIZE" -d 36000 --json >"$work/$broker-fill.json" 2>&1 &
  fill_pid=$!
  pids+=("$fill_pid")
  goal=$((FILL_GIB * 1024 * 1024 * 1024))
  while :; do
    have=$(max_offset)
    [ "$have" -ge "$goal" ] && break
    # A backstop should the broker be too busy to answer: the newest
    # CommitLog file starts past the goal by a file.
    last=$(find "$store/commitlog" -type f -printf '%f\n' | sort | tail -n 1)
    [ $((10#${last:-0})) -ge $((goal + 1073741824)) ] && break
    kill -0 "$fill_pid" 2>/dev/null || { cat "$work/$broker-fill.json" >&2; exit 1; }
    sleep 1
  done
  # (SIGINT is ignored by a background job of a non-interactive shell.)
  kill -9 "$fill_pid" 2>/dev/null || true
  wait "$fill_pid" 2>/dev/null || true
  fill_s=$((($(now_ms) - t0) / 1000))
  sleep 2
  have=$(max_offset)
  echo "# $broker: CommitLog filled to $((have / 1024 / 1024)) MiB in ${fill_s} s"

  stop TERM
  sleep 1
  timed_start "$broker" clean
  stop KILL
  sleep 1
  timed_start "$broker" kill-9
  stop KILL
  for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  pids=()
  rm -rf "$store" "$store.home" "$store.broker.conf"
done

echo
echo "# ms from launch: port open, ready line, first successful send"
printf 'broker\trestart\tport_ms\tready_ms\tsend_ms\n'
cat "$results"
