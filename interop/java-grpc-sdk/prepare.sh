#!/usr/bin/env bash
# Builds the RocketMQ 5 gRPC Java SDK harness (rocketmq-client-java) into
# target/interop/java-grpc-sdk/build and writes its runtime classpath
# (classes dir + jars in ~/.m2, one line) to sdk.classpath there. READY is
# written last. Unchanged inputs (hash kept next to READY): nothing to do.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../target/interop/java-grpc-sdk"
mkdir -p "$out"
out=$(cd "$out" && pwd)

inputs_hash() {
  (cd "$here" && find pom.xml prepare.sh src -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1
}
hash=$(inputs_hash)
if [ -f "$out/READY" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ] \
  && [ -f "$out/sdk.classpath" ]; then
  exit 0
fi
rm -f "$out/READY"
if ! mvn -B -Dstyle.color=never -f "$here/pom.xml" compile \
  dependency:build-classpath -Dmdep.outputFile="$out/sdk.deps" -Dmdep.includeScope=runtime \
  >"$out/mvn.log" 2>&1; then
  tail -n 60 "$out/mvn.log" >&2
  exit 1
fi
classes="$out/build/classes"
test -f "$classes/basalt/grpc/Main.class"
printf '%s:%s\n' "$classes" "$(cat "$out/sdk.deps")" >"$out/sdk.classpath"
rm -f "$out/sdk.deps"
echo "$hash" >"$out/inputs.sha256"
date -u +%FT%TZ >"$out/READY"
