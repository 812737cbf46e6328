#!/usr/bin/env bash
# Starts Apache RocketMQ 5.5.0's proxy in local mode (ProxyStartup -pm
# local: the broker runs inside the proxy's JVM) in the foreground; the
# script `exec`s the JVM, so its PID is the JVM's. Built by
# interop/java-proxy/prepare.sh. A NameServer must be running
# (scripts/java-broker.sh namesrv).
#
#   scripts/java-proxy.sh --namesrv 127.0.0.1:9876 --broker-port 10911 \
#       --grpc-port 8081 --store /tmp/store [--remoting-port N] \
#       [--flush ASYNC_FLUSH|SYNC_FLUSH] [--heap 4g]
#
# The broker listens on --broker-port, on --broker-port − 2 and + 1 (fast
# and HA ports); the proxy serves gRPC on --grpc-port and remoting on
# --remoting-port (default --grpc-port + 1). All must be free. The broker's
# settings are scripts/java-broker.sh's; the configuration files are
# written beside the store (<store>.broker.conf, <store>.rmq-proxy.json).
# JAVA_BROKER_PROFILE (test|bench) picks the JVM flags as in java-broker.sh.
# It prints "rocketmq-proxy startup successfully" once serving.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
namesrv="" broker_port="" grpc_port="" remoting_port="" store="" flush=ASYNC_FLUSH heap=4g
while [ $# -gt 0 ]; do
  case "$1" in
    --namesrv) namesrv=$2; shift 2 ;;
    --broker-port) broker_port=$2; shift 2 ;;
    --grpc-port) grpc_port=$2; shift 2 ;;
    --remoting-port) remoting_port=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    --flush) flush=$2; shift 2 ;;
    --heap) heap=$2; shift 2 ;;
    *) echo "java-proxy.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
[ -n "$namesrv" ] && [ -n "$broker_port" ] && [ -n "$grpc_port" ] && [ -n "$store" ] ||
  { echo "java-proxy.sh: --namesrv, --broker-port, --grpc-port and --store are required" >&2; exit 64; }
remoting_port=${remoting_port:-$((grpc_port + 1))}
cp_file=$root/target/interop/java-proxy/proxy.classpath
[ -f "$cp_file" ] || { echo "java-proxy.sh: $cp_file missing; run interop/java-proxy/prepare.sh" >&2; exit 66; }

case "${JAVA_BROKER_PROFILE:-test}" in
  test) jvm_opts=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:MaxDirectMemorySize=512m) ;;
  bench) jvm_opts=(-server -XX:+UseG1GC -XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25
    -XX:InitiatingHeapOccupancyPercent=30 -XX:SoftRefLRUPolicyMSPerMB=0 -XX:-OmitStackTraceInFastThrow
    -XX:+AlwaysPreTouch -XX:MaxDirectMemorySize=15g -XX:-UseLargePages) ;;
  *) echo "java-proxy.sh: JAVA_BROKER_PROFILE is test or bench" >&2; exit 64 ;;
esac

mkdir -p "$store"
store=$(cd "$store" && pwd)
home=$store.home
mkdir -p "$home"
{
  echo "brokerClusterName=DefaultCluster"
  echo "brokerName=broker-a"
  echo "brokerId=0"
  echo "brokerRole=ASYNC_MASTER"
  echo "flushDiskType=$flush"
  echo "namesrvAddr=$namesrv"
  echo "brokerIP1=127.0.0.1"
  echo "listenPort=$broker_port"
  echo "haListenPort=$((broker_port + 1))"
  echo "storePathRootDir=$store"
  echo "storePathCommitLog=$store/commitlog"
  echo "autoCreateTopicEnable=true"
  echo "autoCreateSubscriptionGroup=true"
  echo "diskMaxUsedSpaceRatio=99"
} >"$store.broker.conf"
cat >"$store.rmq-proxy.json" <<JSON
{
  "rocketMQClusterName": "DefaultCluster",
  "namesrvAddr": "$namesrv",
  "proxyMode": "local",
  "grpcServerPort": $grpc_port,
  "remotingListenPort": $remoting_port
}
JSON
export ROCKETMQ_HOME=$home
exec "${JAVA:-java}" "-Xms$heap" "-Xmx$heap" "${jvm_opts[@]}" \
  -Drocketmq.home.dir="$home" -Duser.home="$home" \
  -cp "$(cat "$cp_file")" org.apache.rocketmq.proxy.ProxyStartup \
  -pc "$store.rmq-proxy.json" -bc "$store.broker.conf" -pm local -n "$namesrv"
