#!/usr/bin/env bash
# Builds the mqadmin harness: resolves Apache RocketMQ's rocketmq-tools
# 5.5.0 (mqadmin, main class org.apache.rocketmq.tools.command.MQAdminStartup)
# from Maven Central and writes its runtime classpath, one line, to
# target/interop/mqadmin/mqadmin.classpath; READY last. Skips Maven when the
# pom is unchanged since the last build and every jar is still there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/target/interop/mqadmin"
mkdir -p "$out"
stamp=$(sha256sum "$here/pom.xml" "$here/prepare.sh" | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ "$(cat "$out/READY")" = "$stamp" ] && [ -s "$out/mqadmin.classpath" ]; then
  missing=0
  # The classpath file has no final newline, so read reports EOF (status 1).
  IFS=: read -ra jars < "$out/mqadmin.classpath" || true
  for j in "${jars[@]}"; do [ -e "$j" ] || missing=1; done
  [ "$missing" = 0 ] && exit 0
fi
rm -f "$out/READY"
mvn -q -B -f "$here/pom.xml" dependency:build-classpath \
  -Dmdep.outputFile="$out/mqadmin.classpath.tmp" -Dmdep.includeScope=runtime
mv "$out/mqadmin.classpath.tmp" "$out/mqadmin.classpath"
# A smoke run: the entry point loads and lists its verbs.
java -cp "$(cat "$out/mqadmin.classpath")" org.apache.rocketmq.tools.command.MQAdminStartup \
  | grep -q clusterList
echo "$stamp" > "$out/READY"
