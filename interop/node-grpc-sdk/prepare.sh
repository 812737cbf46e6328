#!/usr/bin/env bash
# Installs the RocketMQ 5 gRPC SDK for Node.js harness: the official SDK
# (npm rocketmq-client-nodejs, pinned at 1.0.8 in package.json, every
# dependency pinned in the committed package-lock.json) and the
# self-checking cases in this directory, into target/interop/node-grpc-sdk/
# (package files and *.js copied there, `npm ci` puts node_modules beside
# them; nothing is installed in the source tree). Skips the install when the
# package files, cases and this script are unchanged since the last one
# (their hash is kept next to READY). The npm registry must be reachable
# the first time (npm's cache, ~/.npm, serves later installs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../target/interop/node-grpc-sdk"
mkdir -p "$out"
hash=$(cd "$here" && cat package.json package-lock.json ./*.js prepare.sh | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ -d "$out/node_modules/rocketmq-client-nodejs" ] &&
  [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi
rm -f "$out/READY"
rm -f "$out"/*.js
cp "$here/package.json" "$here/package-lock.json" "$here"/*.js "$out/"
cd "$out"
# ci: exactly the lock file's versions (it fails when package.json and the
# lock disagree); --ignore-scripts: no dependency needs an install script
# (@node-rs/crc32's native code comes as a per-platform package).
npm ci --ignore-scripts --no-audit --no-fund
node -e "require('rocketmq-client-nodejs')"
echo "$hash" >"$out/inputs.sha256"
echo "node $(node --version), rocketmq-client-nodejs $(node -p "require('rocketmq-client-nodejs/package.json').version")" >"$out/READY"
