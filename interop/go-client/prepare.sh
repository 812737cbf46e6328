#!/usr/bin/env bash
# Builds the Go client harness: the official RocketMQ Go client
# (github.com/apache/rocketmq-client-go/v2, pinned in go.mod / go.sum) and
# the self-checking cases in this directory, into
# target/interop/go-client/bin/goclient. Skips the build when the sources
# and module files are unchanged since the last one (their hash is kept
# next to READY). The Go module proxy must be reachable the first time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../target/interop/go-client"
mkdir -p "$out/bin"
hash=$(cd "$here" && cat go.mod go.sum ./*.go prepare.sh | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ -x "$out/bin/goclient" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi
rm -f "$out/READY"
cd "$here"
# -mod=readonly: the committed go.sum must cover every module (no edits);
# -buildvcs=false: the binary needs no VCS stamp (and a checkout whose .git
# belongs to another user would refuse one).
go build -mod=readonly -trimpath -buildvcs=false -o "$out/bin/goclient" .
echo "$hash" >"$out/inputs.sha256"
go version >"$out/READY"
