#!/usr/bin/env bash
# Builds the Java-client conformance harness twice, against
# org.apache.rocketmq:rocketmq-client 4.9.8 and 5.5.0, into
# target/interop/java-client/build-rmq{4,5}, and writes each runtime
# classpath (classes dir + jars in ~/.m2, one line) to rmq4.classpath /
# rmq5.classpath there. READY is written last. When the pom and sources are
# unchanged since the last build (their hash is kept next to READY), it does
# nothing. Quiet on success.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../target/interop/java-client"
mkdir -p "$out"
out=$(cd "$out" && pwd)

inputs_hash() {
  (cd "$here" && find pom.xml prepare.sh src -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1
}
hash=$(inputs_hash)
if [ -f "$out/READY" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ] \
  && [ -f "$out/rmq4.classpath" ] && [ -f "$out/rmq5.classpath" ]; then
  exit 0
fi
rm -f "$out/READY"

for v in rmq4 rmq5; do
  if ! mvn -B -Dstyle.color=never -f "$here/pom.xml" -P"$v" compile \
    dependency:build-classpath -Dmdep.outputFile="$out/$v.deps" -Dmdep.includeScope=runtime \
    >"$out/mvn-$v.log" 2>&1; then
    tail -n 60 "$out/mvn-$v.log" >&2
    exit 1
  fi
  classes="$out/build-$v/classes"
  test -f "$classes/basalt/interop/Main.class"
  printf '%s:%s\n' "$classes" "$(cat "$out/$v.deps")" >"$out/$v.classpath"
  rm -f "$out/$v.deps"
done
echo "$hash" >"$out/inputs.sha256"
date -u +%FT%TZ >"$out/READY"
