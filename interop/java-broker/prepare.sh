#!/usr/bin/env bash
# Builds the java-broker family: Apache RocketMQ 5.5.0's NameServer and
# broker (run by scripts/java-broker.sh) and the loader in src/main/java
# (basalt.interop.Loader), both on one classpath written to
# target/interop/java-broker/broker.classpath. Skips Maven when the pom and
# sources are unchanged since the last build. READY is written last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../../target/interop/java-broker
mkdir -p "$out"
out=$(cd "$out" && pwd)
hash=$(cat "$here/pom.xml" $(find "$here/src" -type f | sort) | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ] &&
  [ -d "$out/classes" ] && [ -f "$out/broker.classpath" ]; then
  exit 0
fi
rm -f "$out/READY"
cd "$here"
mvn -q -B -DskipTests \
  package dependency:build-classpath -Dmdep.outputFile="$out/deps.classpath"
rm -rf "$out/classes"
cp -r "$here/target/classes" "$out/classes"
rm -rf "$here/target"
echo "$out/classes:$(cat "$out/deps.classpath")" >"$out/broker.classpath"
echo "$hash" >"$out/inputs.sha256"
touch "$out/READY"
