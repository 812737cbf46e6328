#!/usr/bin/env bash
# Starts Apache RocketMQ 5.5.0's NameServer or broker (built by
# interop/java-broker/prepare.sh) in the foreground: the script `exec`s the
# JVM, so its PID is the JVM's (kill -9 it to crash the broker).
#
#   scripts/java-broker.sh namesrv --port 9876 [--heap 256m]
#   scripts/java-broker.sh broker --namesrv 127.0.0.1:9876 --port 10911 \
#       --store /tmp/store [--ha-port N] [--flush ASYNC_FLUSH|SYNC_FLUSH] \
#       [--heap 512m] [--name broker-a] [--set key=value ...]
#
# The broker listens on --port, on --port − 2 (the "fast"/VIP channel) and
# on --ha-port (default --port + 1): all three must be free. --store is
# storePathRootDir (commitlog/, consumequeue/, config/, ...); the
# broker.conf the script writes goes beside it (<store>.broker.conf), and
# ROCKETMQ_HOME points at a directory under the store's parent that holds
# nothing the broker needs (5.5.0 reads only its logback config from the
# classpath; it insists on the variable being set).
#
# Environment:
#   JAVA_BROKER_CLASSPATH  classpath file (default
#                          target/interop/java-broker/broker.classpath)
#   JAVA_BROKER_JVM_OPTS   JVM flags replacing the defaults below (heap
#                          excluded: --heap sets -Xms/-Xmx)
#   JAVA_BROKER_PROFILE    "test" (default): SerialGC, C1 only — cheap for
#                          the suite on two cores; "bench": the flags of the
#                          Java distribution's runbroker.sh (G1, 16m
#                          regions, AlwaysPreTouch, ...)
#   JAVA                   java binary (default $JAVA_HOME/bin/java or java)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
role=${1:-}
[ -n "$role" ] && shift || true
port="" namesrv="" store="" ha_port="" flush=ASYNC_FLUSH heap="" name=broker-a
sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --namesrv) namesrv=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    --ha-port) ha_port=$2; shift 2 ;;
    --flush) flush=$2; shift 2 ;;
    --heap) heap=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --set) sets+=("$2"); shift 2 ;;
    *) echo "java-broker.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done

cp_file=${JAVA_BROKER_CLASSPATH:-$root/target/interop/java-broker/broker.classpath}
[ -f "$cp_file" ] || { echo "java-broker.sh: $cp_file missing; run interop/prepare.sh" >&2; exit 66; }
classpath=$(cat "$cp_file")
if [ -n "${JAVA:-}" ]; then java_bin=$JAVA
elif [ -n "${JAVA_HOME:-}" ]; then java_bin=$JAVA_HOME/bin/java
else java_bin=java; fi

case "${JAVA_BROKER_PROFILE:-test}" in
  test) default_opts="-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:MaxDirectMemorySize=512m" ;;
  bench) default_opts="-server -XX:+UseG1GC -XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25 \
-XX:InitiatingHeapOccupancyPercent=30 -XX:SoftRefLRUPolicyMSPerMB=0 -XX:-OmitStackTraceInFastThrow \
-XX:+AlwaysPreTouch -XX:MaxDirectMemorySize=15g -XX:-UseLargePages" ;;
  *) echo "java-broker.sh: JAVA_BROKER_PROFILE is test or bench" >&2; exit 64 ;;
esac
# shellcheck disable=SC2206
jvm_opts=(${JAVA_BROKER_JVM_OPTS:-$default_opts})

case "$role" in
  namesrv)
    [ -n "$port" ] || { echo "java-broker.sh namesrv: --port is required" >&2; exit 64; }
    heap=${heap:-256m}
    home=${TMPDIR:-/tmp}/basalt-java-namesrv-$port
    mkdir -p "$home"
    conf=$home/namesrv.conf
    printf 'listenPort=%s\n' "$port" >"$conf"
    export ROCKETMQ_HOME=$home
    exec "$java_bin" "-Xms$heap" "-Xmx$heap" "${jvm_opts[@]}" \
      -Drocketmq.home.dir="$home" -Duser.home="$home" \
      -cp "$classpath" org.apache.rocketmq.namesrv.NamesrvStartup -c "$conf"
    ;;
  broker)
    [ -n "$port" ] && [ -n "$namesrv" ] && [ -n "$store" ] ||
      { echo "java-broker.sh broker: --port, --namesrv and --store are required" >&2; exit 64; }
    heap=${heap:-512m}
    ha_port=${ha_port:-$((port + 1))}
    mkdir -p "$store"
    store=$(cd "$store" && pwd)
    home=$store.home
    mkdir -p "$home"
    conf=$store.broker.conf
    {
      echo "brokerClusterName=DefaultCluster"
      echo "brokerName=$name"
      echo "brokerId=0"
      echo "brokerRole=ASYNC_MASTER"
      echo "flushDiskType=$flush"
      echo "namesrvAddr=$namesrv"
      echo "brokerIP1=127.0.0.1"
      echo "listenPort=$port"
      echo "haListenPort=$ha_port"
      echo "storePathRootDir=$store"
      echo "storePathCommitLog=$store/commitlog"
      echo "autoCreateTopicEnable=true"
      echo "autoCreateSubscriptionGroup=true"
      # The Java default refuses sends when the disk is 90% full; CI disks
      # are often fuller than that.
      echo "diskMaxUsedSpaceRatio=99"
      for kv in ${sets[@]+"${sets[@]}"}; do echo "$kv"; done
    } >"$conf"
    export ROCKETMQ_HOME=$home
    exec "$java_bin" "-Xms$heap" "-Xmx$heap" "${jvm_opts[@]}" \
      -Drocketmq.home.dir="$home" -Duser.home="$home" \
      -cp "$classpath" org.apache.rocketmq.broker.BrokerStartup -c "$conf"
    ;;
  *)
    echo "usage: java-broker.sh namesrv|broker [options] (see the script's header)" >&2
    exit 64
    ;;
esac
