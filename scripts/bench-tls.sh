#!/usr/bin/env bash
# What TLS costs (issue 31, docs/benchmarks.md "TLS on the client port"),
# side by side in one run: two `basalt standalone` brokers from one build,
#   off   tls.server.mode=disabled (the plain accept path, nothing peeked);
#   perm  tls.server.mode=permissive with a certificate (TLS and plain on one
#         port, told apart by the first byte),
# and three cases per round, in turn:
#   off-plain   plain client against `off`;
#   perm-plain  plain client against `perm` (what permissive costs plain text);
#   perm-tls    `basalt --tls` client against `perm` (TLS 1.3, AES-GCM).
# Each case is `basalt bench produce` (1 KiB, default --threads 4 --window 64,
# 8 s; extra arguments replace these); after it the script prints msg/s,
# p99, the broker's CPU per message (utime + stime from /proc/PID/stat) and
# the client's (from /usr/bin/time).
#
#   scripts/bench-tls.sh [ROUNDS] [bench produce options...]
#
# BASALT_BIN overrides the binary (default: release build). Data go to a
# temp dir under $TMPDIR, removed at the end; the certificate is made up
# with openssl for 127.0.0.1 and removed with it.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-3}
shift || true
produce_args=("$@")
if [ ${#produce_args[@]} -eq 0 ]; then
  produce_args=(--threads 4 --window 64 -s 1024 -d 8)
fi
bin=${BASALT_BIN:-target/release/basalt}
if [ -z "${BASALT_BIN:-}" ]; then
  cargo build --release -q -p basalt
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/basalt-bench-tls.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

start() { # NAME SETTINGS...
  local name=$1 nsp bp
  shift
  nsp=$(free_port)
  bp=$(free_port)
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  "$bin" standalone --data "$work/$name" --namesrv-port "$nsp" --port "$bp" \
    --listen 127.0.0.1 "${sets[@]}" > "$work/$name.log" 2>&1 &
  pids+=($!)
  eval "pid_$name=$! ns_$name=127.0.0.1:$nsp"
  for _ in $(seq 1 3000); do
    grep -q "basalt standalone" "$work/$name.log" 2>/dev/null && return 0
    sleep 0.01
  done
  echo "$name did not start:"; cat "$work/$name.log"; exit 1
}

start off "tls.server.mode=disabled"
start perm "tls.server.mode=permissive" "tls.server.certPath=$work/cert.pem" \
  "tls.server.keyPath=$work/key.pem"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

run_case() { # LABEL BROKER CLIENT_FLAGS...
  local label=$1 broker=$2
  shift 2
  local pid ns before out msgs
  eval "pid=\$pid_$broker ns=\$ns_$broker"
  before=$(cpu_ticks "$pid")
  out="$work/$label.out"
  /usr/bin/time -f "%U %S" -o "$work/$label.time" \
    "$bin" "$@" bench produce --namesrv "$ns" -t "BenchTls" "${produce_args[@]}" > "$out"
  msgs=$(awk '/^total/ {print $2}' "$out")
  awk -v label="$label" -v t=$(( $(cpu_ticks "$pid") - before )) -v hz="$hz" -v n="$msgs" \
    -v client="$(cat "$work/$label.time")" '
    /^total/ { rate = $7 }
    /^latency/ { p99 = $7 }
    END {
      split(client, c, " ")
      printf "%-11s %9.0f msg/s  p99 %-9s broker %6.2f us/msg  client %6.2f us/msg\n",
        label, rate, p99, t * 1e6 / hz / n, (c[1] + c[2]) * 1e6 / n
    }' "$out"
}

echo "rounds: $rounds; bench produce ${produce_args[*]}"
for r in $(seq 1 "$rounds"); do
  echo "round $r"
  run_case off-plain off
  run_case perm-plain perm
  run_case perm-tls perm --tls
done
