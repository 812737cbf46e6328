#!/usr/bin/env bash
# The test command (README "Set up"; .ci/run runs it too): every suite of
# the workspace under cargo-nextest, which runs each test in its own
# process, in parallel, and bounds its time (.config/nextest.toml).
# A machine without cargo-nextest gets it first from crates.io (a few
# minutes, once). Extra arguments go to nextest, e.g. `-p basalt-store`.
#
# The reference-interop suites (the official Java client, mqadmin, the Java
# broker, the Go client, the gRPC SDKs) need Java 17 + Maven, Go and
# Node.js with npm; interop/prepare.sh builds their harnesses first.
# Where that fails (no JDK, no registry),
# those tests skip, saying why, unless BASALT_INTEROP_REQUIRED=1 (CI sets
# it), which makes a failed preparation fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "cargo-nextest is not installed; installing it (cargo install cargo-nextest --locked)" >&2
  cargo install cargo-nextest --locked
fi
if [ "${BASALT_SKIP_INTEROP_PREPARE:-0}" != 1 ]; then
  if ! interop/prepare.sh; then
    if [ "${BASALT_INTEROP_REQUIRED:-0}" = 1 ]; then
      echo "interop harnesses could not be prepared (BASALT_INTEROP_REQUIRED=1)" >&2
      exit 1
    fi
    echo "interop harnesses not ready: their tests will skip" >&2
  fi
fi
exec cargo nextest run --workspace --profile "${NEXTEST_PROFILE:-ci}" "$@"
