#!/usr/bin/env bash
# Builds the RocketMQ 5 gRPC SDK for Rust harness: the official SDK (crate
# `rocketmq` 5.0.0 from apache/rocketmq-clients/rust, pinned with all its
# dependencies in the committed Cargo.lock) and the self-checking cases in
# src/, into target/interop/rust-grpc-sdk/bin/rustgrpcsdk. Cargo's own
# target directory is target/interop/rust-grpc-sdk/cargo (this project is
# not a member of the Basalt workspace). Skips the build when the sources,
# manifest and lock file are unchanged since the last one (their hash is
# kept next to READY). crates.io must be reachable the first time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../target/interop/rust-grpc-sdk"
mkdir -p "$out/bin"
out=$(cd "$out" && pwd)
hash=$(cd "$here" && find Cargo.toml Cargo.lock prepare.sh src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ -x "$out/bin/rustgrpcsdk" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi
rm -f "$out/READY"
# --locked: the committed Cargo.lock must cover every crate. A debug build
# (without debug info): from scratch it took under 2 min of CPU against the
# release build's 4 (one job, measured); the harness does little work.
CARGO_TARGET_DIR="$out/cargo" cargo build --locked --manifest-path "$here/Cargo.toml"
cp "$out/cargo/debug/rustgrpcsdk" "$out/bin/rustgrpcsdk.tmp"
mv "$out/bin/rustgrpcsdk.tmp" "$out/bin/rustgrpcsdk"
echo "$hash" >"$out/inputs.sha256"
cargo --version >"$out/READY"
