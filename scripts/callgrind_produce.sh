#!/usr/bin/env bash
# User-space instructions per produced message, counted by callgrind: a
# figure that does not move with the machine's load (wall-clock and CPU-time
# figures on the shared 2-core machine do), so two brokers can be compared
# even while other work runs. The kernel's share (page faults, syscalls,
# context switches) is not counted; scripts/bench.sh measures it.
#
#   scripts/callgrind_produce.sh BROKER_BIN [CLIENT_BIN]
#
# Starts BROKER_BIN standalone under valgrind on free ports, warms it up with
# a 3 s produce, zeroes the counters, runs `bench produce` (THREADS x WINDOW,
# 1 KiB bodies, DURATION seconds; defaults 2 x 16, 12 s), dumps the counters
# and prints instructions per message. CG_OUT keeps the callgrind file (for
# callgrind_annotate --inclusive=no) under that prefix.
set -euo pipefail
bin=${1:?usage: scripts/callgrind_produce.sh BROKER_BIN [CLIENT_BIN]}
client=${2:-$bin}
work=$(mktemp -d /tmp/basalt-callgrind.XXXXXX)
out=${CG_OUT:-$work/callgrind}
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
nsp=$(free_port); bp=$(free_port)
valgrind --tool=callgrind --callgrind-out-file="$out.%p" \
  "$bin" standalone --data "$work/data" --namesrv-port "$nsp" --port "$bp" --listen 127.0.0.1 \
  > "$work/broker.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; [ -n "${CG_OUT:-}" ] || rm -rf "$work"' EXIT
for _ in $(seq 600); do grep -qs "basalt standalone" "$work/broker.log" && break; sleep 0.1; done
grep -qs "basalt standalone" "$work/broker.log" || { cat "$work/broker.log"; exit 1; }
"$client" bench produce --namesrv "127.0.0.1:$nsp" --threads 1 --window 16 -s 1024 -d 3 > /dev/null 2>&1
callgrind_control -z "$pid" > /dev/null
"$client" bench produce --namesrv "127.0.0.1:$nsp" --threads "${THREADS:-2}" --window "${WINDOW:-16}" \
  -s 1024 -d "${DURATION:-12}" > "$work/produce.out" 2>&1
callgrind_control -d "$pid" > /dev/null
n=$(awk '/^total/ {print $2}' "$work/produce.out")
ir=$(grep -m1 '^summary:' "$out.$pid.1" | awk '{print $2}')
grep '^total' "$work/produce.out"
echo "messages $n  instructions $ir  per message $((ir / n))"
