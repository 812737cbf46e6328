#!/usr/bin/env bash
# Builds every reference-interop harness (interop/*/prepare.sh): the official
# Java client at 4.9.x and 5.x, mqadmin, the Java broker, the Go client, the
# RocketMQ 5 gRPC SDKs for Java (interop/java-grpc-sdk), Go
# (interop/go-grpc-sdk), Python (interop/python-grpc-sdk, a venv with
# rocketmq-python-client from PyPI), Node.js (interop/node-grpc-sdk, npm ci)
# and Rust (interop/rust-grpc-sdk, a cargo project of its own, outside the
# Basalt workspace).
# Each family's script is idempotent and writes what the tests run under
# target/interop/<family>/; the process tests in crates/basalt/tests/suite
# read it from there. Maven Central, the Go module proxy, PyPI, the npm
# registry and crates.io must be reachable the first time (the Maven
# repository is ~/.m2, Go's module cache is Go's own, pip's, npm's and
# cargo's caches are their own).
#
# Exit status: 0 when every family is ready, 1 otherwise (each failure is
# named). scripts/test.sh runs this before the suite.
set -uo pipefail
shopt -s nullglob
cd "$(dirname "$0")"
mkdir -p ../target
failed=()
for script in */prepare.sh; do
  family=${script%/prepare.sh}
  start=$(date +%s)
  if bash "$script" >"../target/interop-prepare-$family.log" 2>&1; then
    echo "interop: $family ready ($(( $(date +%s) - start )) s)"
  else
    echo "interop: $family FAILED to prepare; its log:" >&2
    tail -n 40 "../target/interop-prepare-$family.log" >&2
    failed+=("$family")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "interop: not ready: ${failed[*]}" >&2
  exit 1
fi
