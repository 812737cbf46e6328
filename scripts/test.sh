#!/usr/bin/env bash
# The test command (README "Set up"; .ci/run runs it too): every suite of
# the workspace under cargo-nextest, which runs each test in its own
# process, in parallel, and bounds its time (.config/nextest.toml).
# A machine without cargo-nextest gets it first from crates.io (a few
# minutes, once). Extra arguments go to nextest, e.g. `-p basalt-store`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "cargo-nextest is not installed; installing it (cargo install cargo-nextest --locked)" >&2
  cargo install cargo-nextest --locked
fi
exec cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-ci}" "$@"
