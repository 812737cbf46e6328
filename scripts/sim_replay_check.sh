#!/usr/bin/env bash
# Replay check of the store power-loss simulator (docs/fault-model.md,
# "Replay"): runs each seed RUNS times with BASALT_SIM_DEBUG=1 and compares
# the traces, with what legitimately differs between runs masked (elapsed
# times, CRC values, and the raw record dumps of a flipped bit, which hold
# wall-clock timestamps). Prints the seeds whose traces diverge and the
# count.
#
#   scripts/sim_replay_check.sh                 # seeds 3000..3039, 3 runs
#   FIRST=3000 COUNT=40 RUNS=3 scripts/sim_replay_check.sh
#   MODE=soak ...                               # 200-step soak runs instead of 40-step suite runs
#   BIN=target/debug/deps/power_loss_sim-... ... # a given test binary (else built)
#   KEEP=dir ...                                # keep the masked traces in dir
#   AGAINST=other-binary ...                    # one run with each binary: which seeds
#                                               # behave differently (index file names and
#                                               # sync counts masked: store times decide how
#                                               # often the checkpoint is rewritten)
set -euo pipefail
cd "$(dirname "$0")/.."
FIRST=${FIRST:-3000}
COUNT=${COUNT:-40}
RUNS=${RUNS:-3}
MODE=${MODE:-suite}
if [[ -z "${BIN:-}" ]]; then
  BIN=$(nice -n 10 cargo test -p basalt-store --test power_loss_sim --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*power_loss_sim[^"]*\)".*/\1/p' | tail -1)
fi
[[ -x "$BIN" ]] || { echo "no test binary ($BIN)" >&2; exit 2; }
out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
mask() {
  sed -E \
    -e 's/elapsed: [^,}]*/elapsed: _/g' \
    -e 's/(stored|computed):? (0x[0-9a-f]+|[0-9]+)/\1 _/g' \
    -e 's/finished in [0-9.]+s/finished in _/' -e 's/[0-9]+ filtered out/_ filtered out/' \
    -e "s/thread '([^']*)' \([0-9]+\)/thread '\1'/" \
    -e '/^"/d' -e '/^tail /d' \
    ${AGAINST:+-e 's#/index/[0-9]+#/index/_#g' -e 's/syncs [0-9]+/syncs _/g'}
}
trace() { # binary seed
  if [[ $MODE == soak ]]; then
    BASALT_SIM_FIRST_SEED=$2 BASALT_SIM_SEEDS=1 BASALT_SIM_DEBUG=1 \
      "$1" --ignored --exact soak --nocapture 2>&1 | mask || true
  else
    BASALT_SIM_SEED=$2 BASALT_SIM_DEBUG=1 \
      "$1" --exact suite_seeds_keep_every_acknowledged_message --nocapture 2>&1 | mask || true
  fi
}
diverged=()
for ((seed = FIRST; seed < FIRST + COUNT; seed++)); do
  if [[ -n "${AGAINST:-}" ]]; then
    trace "$BIN" "$seed" >"$out/$seed.1"
    trace "$AGAINST" "$seed" >"$out/$seed.against"
    cmp -s "$out/$seed.1" "$out/$seed.against" || diverged+=("$seed")
    continue
  fi
  for ((r = 1; r <= RUNS; r++)); do
    trace "$BIN" "$seed" >"$out/$seed.$r"
  done
  sums=$(for ((r = 1; r <= RUNS; r++)); do cksum <"$out/$seed.$r"; done | sort -u | wc -l)
  if ((sums > 1)); then diverged+=("$seed"); fi
done
echo "binary: $BIN"
if [[ -n "${AGAINST:-}" ]]; then
  echo "against: $AGAINST"
  echo "mode $MODE, seeds $FIRST..$((FIRST + COUNT - 1)), one run with each binary: ${#diverged[@]} of $COUNT differ${diverged:+: ${diverged[*]}}"
  [[ -n "${KEEP:-}" ]] || rm -rf "$out"
  exit 0
fi
echo "mode $MODE, seeds $FIRST..$((FIRST + COUNT - 1)), $RUNS runs each: ${#diverged[@]} of $COUNT diverged${diverged:+: ${diverged[*]}}"
[[ -n "${KEEP:-}" ]] || rm -rf "$out"
