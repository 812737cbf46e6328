#!/usr/bin/env bash
# Regenerates the gRPC code of crates/basalt-grpc (src/gen/) from its .proto
# files. Run it after editing crates/basalt-grpc/proto; commit the result.
# It builds a small generator (scripts/gen-grpc: protox, a protobuf compiler
# in Rust, and tonic-prost-build) in its own target dir, so neither protoc
# nor a build script is needed, here or in the broker's build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/crates/basalt-grpc/src/gen"
mkdir -p "$out"
cargo run --quiet --release \
  --manifest-path "$root/scripts/gen-grpc/Cargo.toml" \
  --target-dir "$root/target/gen-grpc" -- \
  "$root/crates/basalt-grpc/proto" "$out"
rustfmt --edition 2024 "$out"/*.rs
echo "generated: $(ls "$out")"
