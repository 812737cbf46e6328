#!/usr/bin/env bash
# Broker benchmarks with real processes on 127.0.0.1, as docs/benchmarks.md
# records them. Every run starts its own processes on free ports with fresh
# data in a temp dir and stops them at the end.
#
#   scripts/bench.sh SETUP [bench produce options...]
#
# SETUP is one of
#   single        basalt standalone, ASYNC_FLUSH
#   single-sync   basalt standalone, SYNC_FLUSH
#   sync-master   namesrv + SYNC_MASTER + SLAVE (ASYNC_FLUSH on both)
#   async-master  namesrv + ASYNC_MASTER + SLAVE
#   ledger1       namesrv + one ledger-mode broker (DLedger group of 1)
#   ledger3       namesrv + three ledger-mode brokers (DLedger group of 3)
#
# It prints the start-up time and RSS of the broker process (idle, peak under
# load), then `basalt bench produce` with the options given (default:
# --threads 4 --window 64 -s 1024 -d 10), then `basalt bench consume` of
# what was produced. BASALT_BIN overrides the binary (default: release build);
# BENCH_CONSUME=0 skips the consume step; BROKER_SET="KEY=VALUE ..." passes
# broker settings (space-separated) to the single / single-sync setups; CLIENT_BIN runs the
# bench client from another build (to compare two brokers with one client).
# The data go to a temp dir under $TMPDIR (default /tmp): point it at the
# disk to measure (not a tmpfs, unless that is the point).
# LEDGER_SHM_FOLLOWERS=1 (ledger3): n0 is the preferred leader and keeps its
# data on that disk, the followers n1 and n2 keep theirs in /dev/shm (as if
# each had a device of its own, infinitely fast); the run starts once n0 leads.
# After each step it prints the CPU time the broker process spent per
# message (utime + stime from /proc/PID/stat); for ledger3 also the sum over
# the three members ("members CPU"). BENCH_THREADS=1 also prints, per
# process, the CPU per message of each kind of thread (threads named alike,
# such as tokio's workers, summed; from /proc/PID/task/*/stat).
set -euo pipefail
cd "$(dirname "$0")/.."

setup=${1:?usage: scripts/bench.sh SETUP [bench produce options]}
shift || true
produce_args=("$@")
if [ ${#produce_args[@]} -eq 0 ]; then
  produce_args=(--threads 4 --window 64 -s 1024 -d 10)
fi

bin=${BASALT_BIN:-target/release/basalt}
if [ -z "${BASALT_BIN:-}" ]; then
  cargo build --release -q -p basalt
fi
client=${CLIENT_BIN:-$bin}
# BROKER_SET may name several settings, separated by spaces.
broker_sets=()
for kv in ${BROKER_SET:-}; do broker_sets+=(--set "$kv"); done

work=$(mktemp -d "${TMPDIR:-/tmp}/basalt-bench.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work" ${shm:+"$shm"}
}
trap cleanup EXIT

# free_port: sets $port to a port free now whose successor (a broker's HA
# port) is free too, and that neither it nor its successor was handed out
# before: nothing is bound between two calls, so the OS may offer a port
# twice. (It sets a variable: a $(...) subshell would forget the ports used.)
used_ports=" "
free_port() {
  while :; do
    port=$(python3 -c 'import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", p + 1)); break
    except OSError:
        pass
print(p)')
    # used_ports holds every port handed out and its successor.
    case $used_ports in *" $port "* | *" $((port + 1)) "*) continue ;; esac
    used_ports="$used_ports$port $((port + 1)) "
    return
  done
}

now_ms() { date +%s%3N; }

# start NAME READY_TEXT ARGS...: runs the binary, waits for READY_TEXT in its
# output, prints the milliseconds that took.
start() {
  local name=$1 ready=$2
  shift 2
  local t0
  t0=$(now_ms)
  "$bin" "$@" > "$work/$name.log" 2>&1 &
  pids+=($!)
  eval "pid_$name=$!"
  for _ in $(seq 1 3000); do
    if grep -q "$ready" "$work/$name.log" 2>/dev/null; then
      echo "$name ready in $(( $(now_ms) - t0 )) ms"
      return 0
    fi
    sleep 0.01
  done
  echo "$name did not start:"; cat "$work/$name.log"; exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# members_ticks: CPU ticks summed over every ledger member (empty list: 0).
members=()
members_ticks() {
  local t=0 p
  for p in "${members[@]}"; do t=$(( t + $(cpu_ticks "$p") )); done
  echo "$t"
}
members_per_msg() { # TICKS_BEFORE MESSAGES
  [ ${#members[@]} -gt 1 ] || return 0
  local now
  now=$(members_ticks)
  awk -v t=$(( now - $1 )) -v hz="$(getconf CLK_TCK)" -v n="$2" -v m=${#members[@]} \
    'BEGIN { if (n > 0) printf "members CPU %.2f us/msg (sum of %d)\n", t * 1e6 / hz / n, m }'
}
# cpu_per_msg PID TICKS_BEFORE MESSAGES: broker CPU microseconds per message.
cpu_per_msg() {
  local now
  now=$(cpu_ticks "$1")
  awk -v t=$(( now - $2 )) -v hz="$(getconf CLK_TCK)" -v n="$3" \
    'BEGIN { if (n > 0) printf "broker CPU %.2f us/msg\n", t * 1e6 / hz / n }'
}

# thread_ticks PID...: "PID THREAD-NAME TICKS" for every thread, names made
# one word (tokio's and the ledger's numbered names keep their kind only).
thread_ticks() {
  local p t
  for p in "$@"; do
    for t in /proc/"$p"/task/*; do
      [ -r "$t/stat" ] || continue
      sed -E 's/^[0-9]+ \((.*)\) [A-Za-z] (.*)$/\1\t\2/' "$t/stat" 2>/dev/null |
        awk -F'\t' -v p="$p" '{ n = $1; gsub(/[ ]+/, "_", n); sub(/-n?[0-9]+$/, "", n);
          split($2, f, " "); print p, n, f[11] + f[12] }'
    done
  done
}
# thread_per_msg BEFORE-FILE MESSAGES PID...: per process and thread kind,
# CPU microseconds per message since BEFORE-FILE.
thread_per_msg() {
  local before=$1 n=$2
  shift 2
  thread_ticks "$@" | awk -v hz="$(getconf CLK_TCK)" -v n="$n" '
    NR == FNR { b[$1 " " $2] += $3; next }
    { a[$1 " " $2] += $3 }
    END { if (n <= 0) exit
      for (k in a) { d = a[k] - b[k]; if (d > 0) printf "  threads %s %.2f us/msg\n", k, d * 1e6 / hz / n } }
  ' "$before" - | sort -k2,2n -k4,4nr
}

rss() { awk '/VmHWM|VmRSS|RssAnon|RssFile/ {printf "%s %d MiB  ", $1, $2/1024}' "/proc/$1/status"; echo; }

broker_conf() { # NAME PORT ROLE ID EXTRA...
  local name=$1 port=$2 role=$3 id=$4
  shift 4
  {
    echo "brokerClusterName=BenchCluster"
    echo "brokerName=bench"
    echo "brokerId=$id"
    echo "brokerRole=$role"
    echo "listenAddr=127.0.0.1"
    echo "brokerIP1=127.0.0.1"
    echo "brokerIP2=127.0.0.1"
    echo "listenPort=$port"
    echo "namesrvAddr=$ns"
    echo "storePathRootDir=$work/$name"
    echo "autoCreateTopicEnable=true"
    for kv in "$@"; do echo "$kv"; done
  } > "$work/$name.conf"
}

main=broker
case $setup in
  single | single-sync)
    flush=ASYNC_FLUSH
    [ "$setup" = single-sync ] && flush=SYNC_FLUSH
    free_port; nsp=$port; free_port; bp=$port
    ns=127.0.0.1:$nsp
    start broker "basalt standalone" standalone --data "$work/data" --namesrv-port "$nsp" \
      --port "$bp" --listen 127.0.0.1 --set "flushDiskType=$flush" "${broker_sets[@]}"
    ;;
  sync-master | async-master)
    role=SYNC_MASTER
    [ "$setup" = async-master ] && role=ASYNC_MASTER
    free_port; nsp=$port; ns=127.0.0.1:$nsp
    start namesrv "listening on" namesrv --port "$nsp" --listen 127.0.0.1
    free_port; broker_conf broker "$port" "$role" 0
    free_port; broker_conf slave "$port" SLAVE 1
    start broker "basalt broker" broker -c "$work/broker.conf"
    start slave "basalt broker" broker -c "$work/slave.conf"
    sleep 1
    ;;
  ledger1 | ledger3)
    n=1
    [ "$setup" = ledger3 ] && n=3
    free_port; nsp=$port; ns=127.0.0.1:$nsp
    start namesrv "listening on" namesrv --port "$nsp" --listen 127.0.0.1
    peers=""
    declare -a lports
    for i in $(seq 0 $((n - 1))); do
      free_port; lports[$i]=$port
      peers="${peers:+$peers;}n$i-127.0.0.1:${lports[$i]}"
    done
    extra=()
    shm=""
    if [ "${LEDGER_SHM_FOLLOWERS:-0}" = 1 ]; then
      shm=$(mktemp -d /dev/shm/basalt-bench.XXXXXX)
      extra=(preferredLeaderId=n0)
    fi
    for i in $(seq 0 $((n - 1))); do
      free_port
      broker_conf "b$i" "$port" ASYNC_MASTER 0 enableDLegerCommitLog=true \
        dLegerGroup=bench "dLegerPeers=$peers" "dLegerSelfId=n$i" "${extra[@]}"
      if [ -n "$shm" ] && [ "$i" != 0 ]; then
        sed -i "s|^storePathRootDir=.*|storePathRootDir=$shm/b$i|" "$work/b$i.conf"
      fi
    done
    for i in $(seq 0 $((n - 1))); do
      start "b$i" "basalt broker" broker -c "$work/b$i.conf"
      pv=pid_b$i; members+=("${!pv}")
    done
    # Wait until a leader registered as the master; its RSS is reported.
    main=""
    for _ in $(seq 1 500); do
      for i in $(seq 0 $((n - 1))); do
        [ -n "$shm" ] && [ "$i" != 0 ] && continue
        if grep -q "ledger leader takes sends" "$work/b$i.log"; then main=b$i; fi
      done
      [ -n "$main" ] && break
      sleep 0.02
    done
    [ -n "$main" ] || { echo "no leader"; tail -n 20 "$work"/b*.log; exit 1; }
    echo "leader: $main"
    ;;
  *)
    echo "unknown setup $setup"; exit 2 ;;
esac

sleep 1
pid_var=pid_$main
echo -n "idle:  "; rss "${!pid_var}"
ticks=$(cpu_ticks "${!pid_var}")
mticks=$(members_ticks)
tprocs=("${!pid_var}")
[ ${#members[@]} -gt 1 ] && tprocs=("${members[@]}")
[ "${BENCH_THREADS:-0}" = 1 ] && thread_ticks "${tprocs[@]}" > "$work/threads.before"
"$client" bench produce --namesrv "$ns" "${produce_args[@]}" | tee "$work/produce.out"
total=$(awk '/^total/ {print $2}' "$work/produce.out")
echo -n "produce: "; cpu_per_msg "${!pid_var}" "$ticks" "${total:-0}"
members_per_msg "$mticks" "${total:-0}"
[ "${BENCH_THREADS:-0}" = 1 ] && thread_per_msg "$work/threads.before" "${total:-0}" "${tprocs[@]}"
echo -n "after produce:  "; rss "${!pid_var}"
if [ "${BENCH_CONSUME:-1}" = 1 ]; then
  ticks=$(cpu_ticks "${!pid_var}")
  "$client" bench consume --namesrv "$ns" --from-first -n "${total:-0}" -d 30
  echo -n "consume: "; cpu_per_msg "${!pid_var}" "$ticks" "${total:-0}"
  echo -n "after consume:  "; rss "${!pid_var}"
fi
