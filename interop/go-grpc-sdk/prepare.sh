#!/usr/bin/env bash
# Builds the RocketMQ 5 gRPC SDK for Go harness: the official SDK
# (github.com/apache/rocketmq-clients/golang/v5, pinned at v5.1.2 in go.mod /
# go.sum) and the self-checking cases in this directory, into
# target/interop/go-grpc-sdk/bin/gogrpcsdk. Skips the build when the
# sources and module files are unchanged since the last one (their hash is
# kept next to READY). The Go module proxy must be reachable the first time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../target/interop/go-grpc-sdk"
mkdir -p "$out/bin"
hash=$(cd "$here" && cat go.mod go.sum ./*.go prepare.sh | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ -x "$out/bin/gogrpcsdk" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi
rm -f "$out/READY"
cd "$here"
# -mod=readonly: the committed go.sum must cover every module;
# -buildvcs=false: the binary needs no VCS stamp.
go build -mod=readonly -trimpath -buildvcs=false -o "$out/bin/gogrpcsdk" .
echo "$hash" >"$out/inputs.sha256"
go version >"$out/READY"
