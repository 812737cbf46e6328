#!/usr/bin/env bash
# Resolves Apache RocketMQ 5.5.0's proxy (interop/java-proxy/pom.xml: the
# proxy, with the broker it runs in local mode) from Maven Central and
# writes its runtime classpath to target/interop/java-proxy/proxy.classpath.
# Skips Maven when the pom is unchanged. READY is written last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../../target/interop/java-proxy
mkdir -p "$out"
out=$(cd "$out" && pwd)
hash=$(cat "$here/pom.xml" "$here/prepare.sh" | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ] &&
  [ -f "$out/proxy.classpath" ]; then
  exit 0
fi
rm -f "$out/READY"
if ! mvn -B -Dstyle.color=never -f "$here/pom.xml" dependency:build-classpath \
  -Dmdep.outputFile="$out/proxy.classpath" -Dmdep.includeScope=runtime >"$out/mvn.log" 2>&1; then
  tail -n 60 "$out/mvn.log" >&2
  exit 1
fi
echo "$hash" >"$out/inputs.sha256"
touch "$out/READY"
